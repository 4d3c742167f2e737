"""`DelegatingLightningStore`: a `LightningStore` whose every store method is answered by another store.

`LightningStoreServer` is one (as in Agent Lightning 0.3, the server *is* a store: code given the server
object -- ``LLMProxy(store=server)``, an algorithm, a hook -- reads and writes the served store), and
`LightningStoreThreaded` returns the store it is given, since agl stores are thread-safe themselves.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from agl_core.store.base import BACKEND_METHODS, LightningStore, LightningStoreCapabilities

__all__ = ["DELEGATED_METHODS", "DelegatingLightningStore"]

DELEGATED_METHODS: tuple[str, ...] = tuple(
    name
    for name, member in vars(LightningStore).items()
    if inspect.iscoroutinefunction(member)
    and not name.startswith("_")
    and name not in ("close", *BACKEND_METHODS)
) + tuple(BACKEND_METHODS.values())
"""The coroutine methods of the `LightningStore` contract that are forwarded: the public ones that are
not final (``close`` is not forwarded either: the delegate's owner closes it) and the backend methods
of the final ones, which receive the request the public method checked."""


def _forward(name: str) -> Callable[..., Any]:
    contract = getattr(LightningStore, name)

    @functools.wraps(contract)
    async def method(self: DelegatingLightningStore, *args: Any, **kwargs: Any) -> Any:
        return await getattr(self.store, name)(*args, **kwargs)

    method.__isabstractmethod__ = False  # type: ignore[attr-defined]
    return method


class DelegatingLightningStore(LightningStore):
    """A store that forwards every `LightningStore` method to ``self.store``.

    Subclasses set ``self.store`` in their constructor. ``capabilities`` and ``otlp_traces_endpoint``
    are the delegate's unless overridden.
    """

    store: LightningStore

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        """The delegate's capabilities."""
        return self.store.capabilities

    def otlp_traces_endpoint(self) -> str:
        """The delegate's OTLP endpoint."""
        return self.store.otlp_traces_endpoint()


for _name in DELEGATED_METHODS:
    setattr(DelegatingLightningStore, _name, _forward(_name))
DelegatingLightningStore.__abstractmethods__ = frozenset()
del _name
