"""Compact span storage of `InMemoryLightningStore`: one tuple per stored span.

A `Span` object costs about 1.9 KB before its own data: the instance, its ``__dict__`` of 16 fields,
its own ``__pydantic_fields_set__`` (a set of 16 names, the largest part) and an empty
``__pydantic_extra__`` dict. The store keeps instead a `PackedSpan`: a tuple of the 16 field values,
the set of field names (one shared set per distinct set of names) and the extra fields (None when
there are none). The rollout and attempt ids inside are the store's own strings, shared by all spans
of an attempt. That is about 190 bytes before the span's data.

`unpack` builds a fresh, equal `Span` on every read, so reassigning a field of the added span or of a
returned one no longer changes the stored copy (nested values such as the attributes dict are still
shared: never modify them). Spans of a subclass of `Span`, or with private attributes, are kept as given.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from agl_core.types import Span

__all__ = ["PackedSpan", "SpanPacker", "unpack", "unpack_spans"]

PackedSpan = tuple[Any, ...]
"""The 16 field values of a span in `Span.model_fields` order, its fields-set and its extras."""

_FIELDS: tuple[str, ...] = tuple(Span.model_fields)
_COUNT = len(_FIELDS)
ATTEMPT_ID = _FIELDS.index("attempt_id")
_ROLLOUT_ID = _FIELDS.index("rollout_id")
_ALL_FIELDS = frozenset(_FIELDS)

_new = object.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


class SpanPacker:
    """Packs spans, sharing one fields-set object per distinct set of field names."""

    __slots__ = ("_fields_sets",)

    def __init__(self) -> None:
        self._fields_sets: dict[frozenset[str], set[str]] = {}

    def pack(self, span: Span, rollout_id: str, attempt_id: str) -> PackedSpan | Span:
        """The stored form of `span`, using the store's own `rollout_id`/`attempt_id` strings."""
        if span.__class__ is not Span or span.__pydantic_private__:
            return span
        values = span.__dict__
        if len(values) != _COUNT:
            return span
        try:
            packed = [values[name] for name in _FIELDS]
        except KeyError:
            return span
        packed[_ROLLOUT_ID] = rollout_id
        packed[ATTEMPT_ID] = attempt_id
        names = frozenset(span.__pydantic_fields_set__)
        shared = self._fields_sets.get(names)
        if shared is None:
            shared = self._fields_sets[names] = set(names)
        extra = span.__pydantic_extra__
        packed.append(shared)
        packed.append(dict(extra) if extra else None)
        return tuple(packed)


def unpack(stored: PackedSpan | Span) -> Span:
    """A new `Span` equal to the one that was packed (a span kept as given is returned as is)."""
    if stored.__class__ is not tuple:
        return stored  # type: ignore[return-value]
    span = _new(Span)
    _set_dict(span, dict(zip(_FIELDS, stored, strict=False)))  # type: ignore[arg-type]
    names = stored[_COUNT]  # type: ignore[index]
    # A caller setting a field on the result adds its name to the fields-set: give partial sets a copy.
    _set_fields(span, names if len(names) == _COUNT else set(names))
    extra = stored[_COUNT + 1]  # type: ignore[index]
    _set_extra(span, {} if extra is None else dict(extra))
    _set_private(span, None)
    return span


def unpack_spans(stored: list[PackedSpan | Span], attempt_id: str | None) -> list[Span]:
    """New spans for the stored ones (all, or only those of `attempt_id`), in stored order."""
    if attempt_id is None:
        return [unpack(item) for item in stored]
    return [
        unpack(item)
        for item in stored
        if (item[ATTEMPT_ID] if item.__class__ is tuple else item.attempt_id) == attempt_id  # type: ignore[union-attr,index]
    ]
