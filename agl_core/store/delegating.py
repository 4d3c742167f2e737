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

from agl_core.store.base import LightningStore, LightningStoreCapabilities, public_method_of
from agl_core.types.queries import AttemptUpdate, RolloutUpdate, StoreQuery

__all__ = ["DELEGATED_METHODS", "DelegatingLightningStore"]

DELEGATED_METHODS: tuple[str, ...] = tuple(
    name
    for name, member in vars(LightningStore).items()
    if inspect.iscoroutinefunction(member) and not name.startswith("_") and name != "close"
)
"""The coroutine methods of the `LightningStore` contract that are forwarded (``close`` is not: the
delegate's owner closes it)."""


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

    async def _execute(self, request: StoreQuery | RolloutUpdate | AttemptUpdate) -> Any:
        """The delegate runs the typed request, unless this class overrides its public method."""
        public = public_method_of(request)
        if getattr(type(self), public) is getattr(DelegatingLightningStore, public):
            return await self.store._execute(request)
        return await super()._execute(request)


for _name in DELEGATED_METHODS:
    setattr(DelegatingLightningStore, _name, _forward(_name))
DelegatingLightningStore.__abstractmethods__ = frozenset()
del _name
