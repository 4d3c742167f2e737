"""Allocation-light construction of pydantic snapshots for `InMemoryLightningStore`.

The in-memory store builds every model it stores from values it has already validated, so running
pydantic validation again (or `model_construct`) would only cost time on the hot paths. These helpers
set the instance slots directly (`agl_core.utils.model_slots.assemble`), which is what
`model_construct`/`model_copy` do, minus the default handling:

- `build(cls, values)` needs every field of `cls` in `values`;
- `replace(model, changes)` is `model.model_copy(update=changes)` (a shallow copy with changes).

`tests/store/test_memory.py` checks that the results equal their validated counterparts, so a
pydantic upgrade that changes the instance layout fails loudly there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from agl_core.utils.model_slots import assemble

__all__ = ["build", "replace"]

_M = TypeVar("_M", bound=BaseModel)
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
    return assemble(cls, values, _all_fields.get(cls) or _fields_of(cls))


def replace(model: _M, changes: Mapping[str, Any]) -> _M:
    """A new instance equal to `model` with the fields in `changes` replaced (no validation)."""
    cls = model.__class__
    values = model.__dict__.copy()
    values.update(changes)
    fields_set = model.__pydantic_fields_set__
    if fields_set is not _all_fields.get(cls):
        fields_set = fields_set | changes.keys()
    extra = model.__pydantic_extra__
    private = model.__pydantic_private__
    return assemble(
        cls,
        values,
        fields_set,
        None if extra is None else extra.copy(),
        None if private is None else private.copy(),
    )
