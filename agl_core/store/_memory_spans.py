"""Compact span storage of `InMemoryLightningStore`.

A `Span` as callers build it costs about 1.9 KB before its own data: the instance, its ``__dict__`` of
16 fields (a 464-byte dict), its own ``__pydantic_fields_set__`` (a set of 16 names, about 1.2 KB, the
largest part) and an empty ``__pydantic_extra__`` dict. The store keeps instead a *row*: a tuple of the
span's 16 field values in field order (184 bytes, one object, built by one C call), with the rollout
and attempt ids replaced by the store's own strings. A read turns a rollout's rows into spans once
(`build_rows`, under the store lock) and keeps those: a stored `Span` of the store's own (80 bytes)
whose values sit in a *split* dict (CPython keeps the 16 keys once for all such dicts: about 200
bytes) and which shares one fields-set and one read-only empty extras dict with every other stored
span. So adding a span costs about what keeping the caller's object would (measured with
``bench/store_bench.py``: building the `Span` on the write path made ``add_many_spans`` 2-3x slower),
spans never read stay small, and reads return the built spans as they are (no object per read).

A span that has extra fields or not every field set is kept as ``(row, fields_set, extra)`` with one
shared fields-set object per distinct set of names, and `unpack` builds a new `Span` for it on every
read. Spans of a subclass of `Span` are kept as given.

Reassigning a field of the span given to `add_span` does not change the stored copy. Returned spans
are the store's own, like every object the store returns: treat them as read-only (setting an
attribute that is not a field raises `TypeError`; use ``span.model_copy(update=...)``).
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from agl_core.types import Span
from agl_core.utils.model_slots import assemble

__all__ = ["SpanPacker", "StoredSpan", "build_rows", "stored_attempt_id", "unpack", "unpack_spans"]

StoredSpan = Span | tuple[Any, ...]
"""What the store keeps per span: a row of field values, ``(row, fields_set, extra)``, or a span."""

_FIELDS: tuple[str, ...] = tuple(Span.model_fields)
_COUNT = len(_FIELDS)
# a span's __dict__ -> its row without the two ids (field order; KeyError if one is missing)
_REST = itemgetter(*_FIELDS[2:])
if _FIELDS[:2] != ("rollout_id", "attempt_id") or Span.__private_attributes__:  # Span changed
    raise ImportError("agl_core.store._memory_spans: update SpanPacker.pack to the fields of Span")


class _SpanValues:
    """Its instances' ``__dict__`` is a split dict: the field names are stored once, in the class."""

    def __init__(self, row: tuple[Any, ...]) -> None:
        # Every instance assigns the same names in the same order, which keeps its dict split (about 200
        # bytes; a copy of such a dict holds a larger value array, about 300, and takes twice as long).
        (
            self.rollout_id,
            self.attempt_id,
            self.sequence_id,
            self.trace_id,
            self.span_id,
            self.parent_id,
            self.name,
            self.status,
            self.attributes,
            self.events,
            self.links,
            self.start_time,
            self.end_time,
            self.context,
            self.parent,
            self.resource,
        ) = row


if tuple(vars(_SpanValues(_FIELDS))) != _FIELDS:  # Span's fields changed
    raise ImportError("agl_core.store._memory_spans: update _SpanValues to the fields of Span")

_ALL_FIELDS: set[str] = set(_FIELDS)  # the fields-set of every span the store builds with all fields


class _NoExtras(dict[str, Any]):
    """The empty ``__pydantic_extra__`` shared by the stored spans: read-only, copied as a plain dict."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "spans returned by the in-memory store are shared and read-only; "
            "use span.model_copy(update={...}) for a changed copy"
        )

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self) -> dict[str, Any]:
        return {}

    def __deepcopy__(self, memo: Any) -> dict[str, Any]:
        return {}

    def __reduce__(self) -> Any:
        return (dict, ())


_NO_EXTRAS = _NoExtras()


def _span_of_row(row: tuple[Any, ...]) -> Span:
    """The store's own `Span` for a row (all fields set, no extras)."""
    return assemble(Span, vars(_SpanValues(row)), _ALL_FIELDS, _NO_EXTRAS)


class SpanPacker:
    """Turns spans into what the store keeps, sharing one fields-set per distinct set of names."""

    __slots__ = ("_fields_sets",)

    def __init__(self) -> None:
        self._fields_sets: dict[frozenset[str], set[str]] = {}

    def pack(self, span: Span, rollout_id: str, attempt_id: str) -> StoredSpan:
        """The stored form of `span`, using the store's own `rollout_id`/`attempt_id` strings."""
        if span.__class__ is not Span:  # `Span` itself has no private attributes
            return span
        values = span.__dict__
        if len(values) != _COUNT:
            return span
        try:
            row: tuple[Any, ...] = (rollout_id, attempt_id) + _REST(values)  # noqa: RUF005 (faster)
        except KeyError:  # a name that is not a field: keep the span as given
            return span
        names = span.__pydantic_fields_set__
        extra = span.__pydantic_extra__
        if not extra and names == _ALL_FIELDS:
            return row
        key = frozenset(names)
        shared = self._fields_sets.get(key)
        if shared is None:
            shared = self._fields_sets[key] = set(key)
        return (row, shared, dict(extra) if extra else None)


def build_rows(stored: list[StoredSpan], start: int) -> None:
    """Replace the rows of ``stored[start:]`` by the store's own spans, in place (call under the lock)."""
    for position in range(start, len(stored)):
        item = stored[position]
        if item.__class__ is tuple and len(item) == _COUNT:
            stored[position] = _span_of_row(item)


def unpack(stored: StoredSpan) -> Span:
    """A `Span` equal to the one that was packed (a stored span is returned as is)."""
    if stored.__class__ is tuple:
        if len(stored) == _COUNT:
            return _span_of_row(stored)
        row, names, extra = stored
        # A caller setting an unknown attribute adds its name to the fields-set: give each its own.
        return assemble(Span, vars(_SpanValues(row)), set(names), {} if extra is None else dict(extra))
    return stored  # type: ignore[return-value]


def stored_attempt_id(stored: StoredSpan) -> str:
    """The attempt id of a stored span."""
    if stored.__class__ is tuple:
        row = stored if len(stored) == _COUNT else stored[0]
        return row[1]  # type: ignore[no-any-return]
    return stored.attempt_id  # type: ignore[union-attr]


def unpack_spans(stored: list[StoredSpan], attempt_id: str | None) -> list[Span]:
    """Spans for the stored ones (all, or only those of `attempt_id`), in stored order."""
    if attempt_id is None:
        return [item if item.__class__ is Span else unpack(item) for item in stored]
    return [unpack(item) for item in stored if stored_attempt_id(item) == attempt_id]
