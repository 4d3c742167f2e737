"""Build pydantic model instances from values that are already valid, by setting their slots.

`model_construct` runs a generic loop over the fields (defaults, aliases) and is slower than
validation in pydantic 2.x; the in-memory store and the HTTP client's page cache build many
instances from values they already hold, so they set the four instance slots of a `BaseModel`
(``__dict__`` and the three pydantic slots) directly. Calling the slot descriptors' ``__set__``
bypasses `BaseModel.__setattr__` and is about twice as fast as ``object.__setattr__``.

- `assemble(cls, values, fields_set, extra, private)` sets every slot as given;
- `build(cls, values)` needs every field of `cls` in `values` (one fields-set shared per class);
- `replace(model, changes)` is ``model.model_copy(update=changes)`` (a shallow copy with changes).

`build` and `replace` set the slots themselves rather than call `assemble`: they run on every write of
the in-memory store, where the extra call measured 0.1 us a snapshot. `tests/store/test_memory.py`
checks the results against validated models, so a pydantic upgrade that changes the instance layout
fails loudly there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["assemble", "build", "replace"]

_M = TypeVar("_M", bound=BaseModel)
_new = object.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__

_all_fields: dict[type, set[str]] = {}


def _fields_of(cls: type[BaseModel]) -> set[str]:
    """The one ``__pydantic_fields_set__`` shared by every instance of `cls` that `build` makes.

    Such an instance has every field set, so this set already holds each name pydantic could ever add
    to it (it only ever adds field names, on attribute assignment); sharing it saves one object per
    instance. `model_copy` (and `replace`) copy the set before changing it.
    """
    fields = _all_fields.get(cls)
    if fields is None:
        fields = _all_fields[cls] = set(cls.model_fields)
    return fields


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
