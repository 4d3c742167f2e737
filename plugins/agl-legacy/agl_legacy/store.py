"""`LightningStore03`: a base for Agent Lightning 0.3-style stores that implement only some methods.

0.3's `LightningStore` raised `NotImplementedError` from every method a subclass did not override, so a store
overriding a few of them could be built and used for those. agl's `LightningStore` has abstract methods (a
backend must write them all), so such a class cannot be instantiated. Derive it from `LightningStore03`
instead: each method it leaves out raises `NotImplementedError` naming the method, as in 0.3, and agl's
own machinery (the HTTP server, the runners, ``_execute``) calls the public methods it does override.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agl_core.store.base import LightningStore

__all__ = ["LightningStore03"]


def _not_implemented(name: str) -> Callable[..., Any]:
    async def method(self: LightningStore, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement {name}() (a 0.3-style store).")

    method.__name__ = method.__qualname__ = name
    method.__doc__ = getattr(
        LightningStore, name
    ).__doc__  # not functools.wraps: that copies the abstract flag
    return method


class LightningStore03(LightningStore):
    """`LightningStore` as 0.3 defined it: methods a subclass leaves out raise `NotImplementedError`."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # the core answers a backend method through the public one the subclass overrides; every method
        # still abstract after that is one the subclass does not provide
        super().__init_subclass__(**kwargs)
        for name in LightningStore.__abstractmethods__:
            if getattr(getattr(cls, name), "__isabstractmethod__", False):
                setattr(cls, name, _not_implemented(name))


for _name in LightningStore.__abstractmethods__:
    setattr(LightningStore03, _name, _not_implemented(_name))
LightningStore03.__abstractmethods__ = frozenset()
del _name
