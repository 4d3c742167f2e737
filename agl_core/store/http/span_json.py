"""JSON of span pages for the server's answers, each stored span encoded once instead of on every read.

Encoding spans is the largest part of the server's work for a ``query_spans`` answer (about 1.5-5 µs a
span, 20 spans a typical page), and a store answers the same stored spans again and again: a trainer
reads a rollout's spans while agents poll them. `SpanJsonCache` keeps the JSON of each span it encoded,
keyed by the span's field-value dict (a store that keeps its spans, like the in-memory one, hands out
spans sharing that dict on every read), and joins the kept bytes into the page's JSON.

An entry is used only while the dict is the same object holding the same field values (the same objects,
or equal ones), so a field that was reassigned is encoded again. Changing a nested value in place (an
attribute of a span returned by the store) is not seen: spans a store returns are read-only, as the
stores document. Spans of a `Span` subclass or with extra fields are always encoded afresh. The answer
is ``pydantic_core.to_json(page)``, byte for byte.
"""

from __future__ import annotations

from typing import Any

import pydantic_core

from agl_core.types import PaginatedResult, Span

__all__ = ["DEFAULT_SPAN_JSON_ENTRIES", "SpanJsonCache"]

DEFAULT_SPAN_JSON_ENTRIES = 16_384
"""Spans whose JSON a server keeps by default (about 10 MB for spans of ~650 bytes)."""


class SpanJsonCache:
    """Encodes pages of spans, reusing the JSON of spans it encoded before (see the module docstring).

    Args:
        max_entries: Most spans kept; past it the oldest entry is dropped. 0 keeps none.
    """

    __slots__ = ("_entries", "max_entries")

    def __init__(self, max_entries: int = DEFAULT_SPAN_JSON_ENTRIES) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}.")
        self.max_entries = max_entries
        # id(values) -> (values, their field values, JSON); holding `values` keeps its id unique
        self._entries: dict[int, tuple[dict[str, Any], tuple[Any, ...], bytes]] = {}

    def __len__(self) -> int:
        """Number of spans whose JSON is kept."""
        return len(self._entries)

    def span_json(self, span: Span) -> bytes:
        """``pydantic_core.to_json(span)``, from the kept bytes when this span was encoded before."""
        if span.__class__ is not Span or span.__pydantic_extra__ or not self.max_entries:
            return pydantic_core.to_json(span)
        values = span.__dict__
        key = id(values)
        current = tuple(values.values())
        entry = self._entries.get(key)
        if entry is not None and entry[0] is values and entry[1] == current:
            return entry[2]
        encoded = pydantic_core.to_json(span)
        entries = self._entries
        if entry is None and len(entries) >= self.max_entries:
            del entries[next(iter(entries))]
        entries[key] = (values, current, encoded)
        return encoded

    def page_json(self, page: PaginatedResult[Span]) -> bytes:
        """``pydantic_core.to_json(page)`` for a page of spans."""
        if page.__pydantic_extra__ or len(page.__dict__) != 4:  # not the plain four-field page
            return pydantic_core.to_json(page)
        span_json = self.span_json
        items = b",".join([span_json(span) for span in page.items])
        return b'{"items":[%b],"limit":%d,"offset":%d,"total":%d}' % (
            items,
            page.limit,
            page.offset,
            page.total,
        )
