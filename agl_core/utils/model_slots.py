"""Build a pydantic model instance from values that are already valid, by setting its slots.

`model_construct` runs a generic loop over the fields (defaults, aliases) and is slower than
validation in pydantic 2.x; the in-memory store and the HTTP client's page cache build many
instances from values they already hold, so they set the four instance slots of a `BaseModel`
(``__dict__`` and the three pydantic slots) directly. Calling the slot descriptors' ``__set__``
bypasses `BaseModel.__setattr__` and is about twice as fast as ``object.__setattr__``.
`tests/store/test_memory.py` checks the results against validated models, so a pydantic upgrade that
changes the instance layout fails loudly there.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["assemble"]

_M = TypeVar("_M", bound=BaseModel)
_new = object.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def assemble(
    cls: type[_M],
    values: dict[str, Any],
    fields_set: set[str],
    extra: dict[str, Any] | None = None,
    private: dict[str, Any] | None = None,
) -> _M:
    """An instance of `cls` holding `values` (taken over, not copied) with the given pydantic slots."""
    obj = _new(cls)
    _set_dict(obj, values)
    _set_fields(obj, fields_set)
    _set_extra(obj, extra)
    _set_private(obj, private)
    return obj
