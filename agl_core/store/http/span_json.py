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

**ETags.** `SpanJsonCache.page_answer` also gives each page a strong ETag: a 128-bit BLAKE2b digest of
the page's paging numbers and of the 128-bit digests of its spans' JSON, each span's digest kept next to
its bytes. Equal ETags mean byte-identical answers (short of a BLAKE2b collision). A page's ETag costs
one hash of 16 bytes a span instead of one of the whole answer (a 20-span page is about 14 KB: hashing
it took 30-60 µs on the shared 2-core reference machine, against 1-3 µs), and an answer that will be
``304 Not Modified`` is never joined.

**Kept page ETags.** A client polling a rollout gets the same page again and again, and checking each
span's entry (a dict lookup, a tuple of its values, a compare) was most of the server's work for a
``304``. So `page_answer` also keeps, for each page it answered ``304`` (bounded by ``max_page_spans``
spans, oldest out; a page that changes between reads is never kept), a copy of each span's field-value
dict and the page's ETag. A later page with the same paging numbers whose
spans are plain `Span` objects with no extra fields and field values equal to the copies (compared in
C: the same objects, or equal ones, as for the span entries) gets the kept ETag without any per-span
Python work. The spans are compared on every call, so a span added, dropped, replaced or reassigned
changes the answer at once; no answer is ever served from a stale page.
"""

from __future__ import annotations

import hashlib
import operator
from typing import Any

import pydantic_core

from agl_core.store.http.etags import DIGEST_SIZE, conditional_body, none_match_hits
from agl_core.types import PaginatedResult, Span

__all__ = ["DEFAULT_PAGE_ETAG_SPANS", "DEFAULT_SPAN_JSON_ENTRIES", "SpanJsonCache"]

DEFAULT_SPAN_JSON_ENTRIES = 16_384
"""Spans whose JSON a server keeps by default (about 10 MB for spans of ~650 bytes)."""

DEFAULT_PAGE_ETAG_SPANS = 4096
"""Spans of the pages whose ETag a server keeps by default (a ~470-byte dict copy each: about 2 MB)."""

_FIELDS_OF = operator.attrgetter("__dict__")
_CLASS_OF = operator.attrgetter("__class__")
_EXTRA_OF = operator.attrgetter("__pydantic_extra__")


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=DIGEST_SIZE).digest()


class SpanJsonCache:
    """Encodes pages of spans, reusing the JSON of spans it encoded before (see the module docstring).

    Args:
        max_entries: Most spans kept; past it the oldest entry is dropped. 0 keeps none.
        max_page_spans: Most spans of the pages whose ETag is kept; past it the oldest page is
            dropped. 0 keeps none.
    """

    __slots__ = ("_entries", "_page_spans", "_pages", "max_entries", "max_page_spans")

    def __init__(
        self, max_entries: int = DEFAULT_SPAN_JSON_ENTRIES, max_page_spans: int = DEFAULT_PAGE_ETAG_SPANS
    ) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}.")
        if max_page_spans < 0:
            raise ValueError(f"max_page_spans must be >= 0, got {max_page_spans}.")
        self.max_entries = max_entries
        self.max_page_spans = max_page_spans
        # id(values) -> (values, their field values, JSON, digest of the JSON); holding `values` keeps
        # its id unique
        self._entries: dict[int, tuple[dict[str, Any], tuple[Any, ...], bytes, bytes]] = {}
        # (limit, offset, total, span count, id of the first span) -> (first span, copies of the spans'
        # field-value dicts, [Span] * count, ETag); holding the first span keeps its id unique
        self._pages: dict[tuple[int, ...], tuple[Span, list[dict[str, Any]], list[type], str]] = {}
        self._page_spans = 0

    def __len__(self) -> int:
        """Number of spans whose JSON is kept."""
        return len(self._entries)

    @property
    def page_spans(self) -> int:
        """Spans of the pages whose ETag is kept now (at most ``max_page_spans``)."""
        return self._page_spans

    def _encoded(self, span: Span) -> tuple[bytes, bytes]:
        """The span's JSON and its digest, from the kept entry when this span was encoded before."""
        if span.__class__ is not Span or span.__pydantic_extra__ or not self.max_entries:
            encoded = pydantic_core.to_json(span)
            return encoded, _digest(encoded)
        values = span.__dict__
        key = id(values)
        current = tuple(values.values())
        entry = self._entries.get(key)
        if entry is not None and entry[0] is values and entry[1] == current:
            return entry[2], entry[3]
        encoded = pydantic_core.to_json(span)
        digest = _digest(encoded)
        entries = self._entries
        if entry is None and len(entries) >= self.max_entries:
            del entries[next(iter(entries))]
        entries[key] = (values, current, encoded, digest)
        return encoded, digest

    def span_json(self, span: Span) -> bytes:
        """``pydantic_core.to_json(span)``, from the kept bytes when this span was encoded before."""
        return self._encoded(span)[0]

    def page_answer(
        self, page: PaginatedResult[Span], if_none_match: str | None = None
    ) -> tuple[bytes | None, str]:
        """``pydantic_core.to_json(page)`` and the page's strong ETag (quoted, see the module docstring).

        The JSON is None when `if_none_match` (an ``If-None-Match`` header) names the ETag: the answer
        is then ``304 Not Modified`` and the page's JSON is not built.
        """
        if page.__pydantic_extra__ or len(page.__dict__) != 4:  # not the plain four-field page
            return conditional_body(pydantic_core.to_json(page), if_none_match)
        items = page.items
        page_key: tuple[int, ...] | None = None
        if items and if_none_match is not None and self.max_page_spans:
            page_key = (page.limit, page.offset, page.total, len(items), id(items[0]))
            kept = self._pages.get(page_key)
            if (
                kept is not None
                and kept[0] is items[0]
                and list(map(_FIELDS_OF, items)) == kept[1]  # copies: each dict is compared by value
                and list(map(_CLASS_OF, items)) == kept[2]
                and not any(map(_EXTRA_OF, items))
            ):
                etag = kept[3]
                if none_match_hits(if_none_match, etag):
                    return None, etag
        entries = self._entries
        encoded: list[bytes] = []
        digests: list[bytes] = []
        for span in page.items:
            # the kept entry, checked as in `_encoded` (inlined: this loop runs for every span answered)
            values = span.__dict__
            entry = entries.get(id(values))
            if (
                entry is not None
                and entry[0] is values
                and span.__class__ is Span
                and not span.__pydantic_extra__
                and entry[1] == tuple(values.values())
            ):
                encoded.append(entry[2])
                digests.append(entry[3])
            else:
                span_json, digest = self._encoded(span)
                encoded.append(span_json)
                digests.append(digest)
        # The numbers end at ';' and every digest has the same length, so different pages never hash
        # the same input: an equal ETag means equal bytes.
        numbers = b"%d,%d,%d;" % (page.limit, page.offset, page.total)
        etag = f'"{hashlib.blake2b(numbers + b"".join(digests), digest_size=DIGEST_SIZE).hexdigest()}"'
        if if_none_match is not None and none_match_hits(if_none_match, etag):
            if page_key is not None:  # a page revalidated unchanged: likely to be asked for again
                self._keep_page(page_key, items, etag)
            return None, etag
        body = b'{"items":[%b],"limit":%d,"offset":%d,"total":%d}' % (
            b",".join(encoded),
            page.limit,
            page.offset,
            page.total,
        )
        return body, etag

    def _keep_page(self, key: tuple[int, ...], items: list[Span], etag: str) -> None:
        """Keep `items`' field values and `etag` for `page_answer`, if every span is a plain `Span`."""
        if len(items) > self.max_page_spans or any(map(_EXTRA_OF, items)):
            return
        classes = list(map(_CLASS_OF, items))
        if classes.count(Span) != len(classes):
            return
        pages = self._pages
        old = pages.pop(key, None)
        if old is not None:
            self._page_spans -= len(old[1])
        while pages and self._page_spans + len(items) > self.max_page_spans:
            self._page_spans -= len(pages.pop(next(iter(pages)))[1])
        pages[key] = (items[0], [dict(values) for values in map(_FIELDS_OF, items)], classes, etag)
        self._page_spans += len(items)
