"""`LightningStore03`: a base for Agent Lightning 0.3-style stores that override public methods.

0.3's `LightningStore` raised `NotImplementedError` from every method a subclass did not override, so a store
overriding a few of them could be built and used for those. agl's `LightningStore` differs twice: a backend
must write every abstract method, and its public query and update methods are final (each checks its
arguments and calls a narrow backend method, see `agl_core.store.base.BACKEND_METHODS`). Derive such a class
from `LightningStore03` instead: each method it leaves out raises `NotImplementedError` naming the method, as
in 0.3, and the backend method of a public method it overrides calls that override, so agl's own machinery
(the HTTP server, delegating stores, the runners) reaches it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agl_core.store.base import BACKEND_METHODS, LightningStore
from agl_core.types.queries import AttemptUpdate, RolloutUpdate, StoreQuery

__all__ = ["LightningStore03"]


def _not_implemented(name: str) -> Callable[..., Any]:
    async def method(self: LightningStore, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement {name}() (a 0.3-style store).")

    method.__name__ = method.__qualname__ = name
    method.__doc__ = getattr(
        LightningStore, name
    ).__doc__  # not functools.wraps: that copies the abstract flag
    return method


def _through_public(public: str) -> Callable[..., Any]:
    """The backend method of `public` for a class that overrides `public`: it calls the override."""

    async def method(self: LightningStore, request: Any, where: Any = None) -> Any:
        call = getattr(self, public)
        if isinstance(request, RolloutUpdate):
            return await call(request.rollout_id, **request.changes())
        if isinstance(request, AttemptUpdate):
            return await call(request.rollout_id, request.attempt_id, **request.changes())
        assert isinstance(request, StoreQuery)
        return await call(**request.keywords())

    method.__name__ = method.__qualname__ = BACKEND_METHODS[public]
    return method


class LightningStore03(LightningStore):
    """`LightningStore` as 0.3 defined it: methods a subclass leaves out raise `NotImplementedError`."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for public, backend in BACKEND_METHODS.items():
            overrides = getattr(cls, public) is not getattr(LightningStore, public)
            if overrides and getattr(cls, backend) is getattr(LightningStore03, backend):
                setattr(cls, backend, _through_public(public))


for _name in LightningStore.__abstractmethods__:
    _public = next((p for p, b in BACKEND_METHODS.items() if b == _name), _name)
    setattr(LightningStore03, _name, _not_implemented(_public))
LightningStore03.__abstractmethods__ = frozenset()
del _name, _public
