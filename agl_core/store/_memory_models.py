"""Allocation-light construction of pydantic snapshots for `InMemoryLightningStore`.

The in-memory store builds every model it stores from values it has already validated, so running
pydantic validation again (or `model_construct`, which is slower than validation in pydantic 2.x)
would only cost time on the hot paths. These helpers set the four instance slots of a `BaseModel`
directly, which is exactly what `model_construct`/`model_copy` do, minus the default handling:

- `build(cls, values)` needs every field of `cls` in `values`;
- `replace(model, changes)` is `model.model_copy(update=changes)` (a shallow copy with changes).

`tests/store/test_memory.py` checks that the results equal their validated counterparts, so a
pydantic upgrade that changes the instance layout fails loudly there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["build", "replace"]

_M = TypeVar("_M", bound=BaseModel)
_new = object.__new__
# The slot descriptors of `BaseModel` (``__dict__`` and the three pydantic slots): calling their
# ``__set__`` directly bypasses `BaseModel.__setattr__` and is about twice as fast as
# ``object.__setattr__``.
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_all_fields: dict[type, set[str]] = {}


def _fields_of(cls: type[BaseModel]) -> set[str]:
    """The one ``__pydantic_fields_set__`` shared by every snapshot of `cls` the store builds.

    A snapshot built here has every field set, so this set already holds each name pydantic could
    ever add to it (it only ever adds field names, on attribute assignment); sharing it saves one
    object per snapshot. `model_copy` copies the set before updating it.
    """
    fields = _all_fields.get(cls)
    if fields is None:
        fields = _all_fields[cls] = set(cls.model_fields)
    return fields


def build(cls: type[_M], values: dict[str, Any]) -> _M:
    """An instance of `cls` holding `values` (every field, already valid; the dict is taken over)."""
    obj = _new(cls)
    _set_dict(obj, values)
    _set_fields(obj, _all_fields.get(cls) or _fields_of(cls))
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


def replace(model: _M, changes: Mapping[str, Any]) -> _M:
    """A new instance equal to `model` with the fields in `changes` replaced (no validation)."""
    cls = model.__class__
    obj = _new(cls)
    values = model.__dict__.copy()
    values.update(changes)
    _set_dict(obj, values)
    fields_set = model.__pydantic_fields_set__
    if fields_set is not _all_fields.get(cls):
        fields_set = fields_set | changes.keys()
    _set_fields(obj, fields_set)
    extra = model.__pydantic_extra__
    _set_extra(obj, None if extra is None else extra.copy())
    private = model.__pydantic_private__
    _set_private(obj, None if private is None else private.copy())
    return obj
