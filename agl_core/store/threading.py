"""Compatibility module for Agent Lightning 0.3's ``agentlightning.store.threading``.

Listed in docs/migrating-from-agent-lightning.md.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any

from agl_core.store.base import LightningStore, LightningStoreCapabilities
from agl_core.store.delegating import DELEGATED_METHODS, DelegatingLightningStore

__all__ = ["LightningStoreThreaded"]


class LightningStoreThreaded(DelegatingLightningStore):
    """Agent Lightning 0.3's thread-safety wrapper: one lock around every call of a store that needs it.

    A store whose ``capabilities["thread_safe"]`` is true (every agl store) is only forwarded to. Any other
    store (a 0.3-style custom one, say) gets 0.3's lock: one call at a time from all threads, except
    ``wait_for_rollouts``, which only reads. A caller waiting for the lock does not block its event loop.
    """

    def __init__(self, store: LightningStore) -> None:
        super().__init__()
        self.store = store
        self._lock: threading.Lock | None = (
            None if store.capabilities.get("thread_safe", False) else threading.Lock()
        )

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        """The wrapped store's capabilities, with ``thread_safe`` and ``async_safe`` set."""
        return LightningStoreCapabilities(
            **{**self.store.capabilities, "thread_safe": True, "async_safe": True}
        )


_CALLS: tuple[str, ...] = tuple(
    dict.fromkeys(
        [
            name
            for name, member in vars(LightningStore).items()
            if inspect.iscoroutinefunction(member) and not name.startswith("_") and name != "close"
        ]
        + list(DELEGATED_METHODS)
    )
)
"""Every public coroutine method, forwarded as called (so a 0.3 store's override of a method agl made final
is still the one that runs, under the lock), and the backend methods `DelegatingLightningStore` forwards."""


def _locked(name: str) -> Callable[..., Any]:
    contract = getattr(LightningStore, name)

    async def forward(self: LightningStoreThreaded, *args: Any, **kwargs: Any) -> Any:
        return await getattr(self.store, name)(*args, **kwargs)

    @functools.wraps(contract)
    async def method(self: LightningStoreThreaded, *args: Any, **kwargs: Any) -> Any:
        lock = self._lock
        if lock is None or name == "wait_for_rollouts":
            return await forward(self, *args, **kwargs)
        if not lock.acquire(blocking=False):
            await asyncio.to_thread(lock.acquire)  # another thread or task holds it: wait off the loop
        try:
            return await forward(self, *args, **kwargs)
        finally:
            lock.release()

    method.__isabstractmethod__ = False  # type: ignore[attr-defined]
    return method


for _name in _CALLS:
    setattr(LightningStoreThreaded, _name, _locked(_name))
del _name
