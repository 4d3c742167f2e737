"""Compatibility module for Agent Lightning 0.3's ``agentlightning.store.threading``.

Listed in docs/migrating-from-agent-lightning.md.
"""

from __future__ import annotations

from agl_core.store.base import LightningStore, LightningStoreCapabilities
from agl_core.store.delegating import DelegatingLightningStore

__all__ = ["LightningStoreThreaded"]


class LightningStoreThreaded(DelegatingLightningStore):
    """Agent Lightning 0.3's thread-safety wrapper: here a plain pass-through to ``store``.

    Every agl store is safe to call from several threads (each store guards its own state), so no lock
    is added; the wrapper only forwards, and reports ``thread_safe`` and ``async_safe``.
    """

    def __init__(self, store: LightningStore) -> None:
        super().__init__()
        self.store = store

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        """The wrapped store's capabilities, with ``thread_safe`` and ``async_safe`` set."""
        return LightningStoreCapabilities(
            **{**self.store.capabilities, "thread_safe": True, "async_safe": True}
        )
