"""The client's cache of decoded span pages, revalidated with the server's ETags.

`LightningStoreClient.query_spans` keeps the page it decoded under the exact request it sent (the JSON
body of ``POST /v1/agl/spans/search``) with the answer's ``ETag``. The next identical request carries
``If-None-Match``; a ``304 Not Modified`` (no body) means the answer would be byte for byte the same, so
the kept page is returned without transferring or decoding anything. Any change on the server (a new
span, another page of a changed rollout) changes the ETag, and the server answers the new page in full.
An answer without an ETag (an older server) is not kept.

The cache is bounded by entries and by the answers' JSON bytes, least recently used first out; pages
bigger than ``max_page_bytes`` are never kept. Decoded spans take about 5 times the memory of their JSON
(73 KB for the 14 KB answer of 20 typical spans), so the default bound of 4 MiB of JSON holds about 20 MB.
It is safe to use from many threads and event loops at once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import NamedTuple

from agl_core.types import PaginatedResult, Span
from agl_core.utils.model_slots import assemble

__all__ = [
    "DEFAULT_PAGE_CACHE_BYTES",
    "DEFAULT_PAGE_CACHE_ENTRIES",
    "DEFAULT_PAGE_CACHE_PAGE_BYTES",
    "CachedPage",
    "SpanPageCache",
]

_SPAN_PAGE = PaginatedResult[Span]
_PAGE_FIELDS = frozenset(("items", "limit", "offset", "total"))

DEFAULT_PAGE_CACHE_ENTRIES = 128
"""Pages a client keeps by default."""

DEFAULT_PAGE_CACHE_BYTES = 4 * 1024 * 1024
"""JSON bytes of the pages a client keeps by default (4 MiB: about 20 MB of decoded spans)."""

DEFAULT_PAGE_CACHE_PAGE_BYTES = 1024 * 1024
"""Largest answer (JSON bytes) a client keeps by default (1 MiB)."""


class CachedPage(NamedTuple):
    """A decoded page (its spans in a tuple), the ETag of its answer and the bytes it counts."""

    etag: str
    items: tuple[Span, ...]
    limit: int
    offset: int
    total: int
    size: int

    def page(self) -> PaginatedResult[Span]:
        """A new page of the kept spans (the spans themselves are shared: read-only)."""
        # set the model's slots (`assemble`): `model_construct`'s generic field loop would be most of
        # the client's work for a revalidated read
        values = {"items": list(self.items), "limit": self.limit, "offset": self.offset, "total": self.total}
        return assemble(_SPAN_PAGE, values, set(_PAGE_FIELDS))


class SpanPageCache:
    """Bounded LRU map: request bytes -> `CachedPage` (see the module docstring).

    Args:
        max_entries: Most pages kept (>= 1).
        max_bytes: Most JSON bytes of the kept answers, request keys included.
        max_page_bytes: Largest single answer kept.
    """

    __slots__ = ("_entries", "_lock", "_size", "max_bytes", "max_entries", "max_page_bytes")

    def __init__(
        self,
        max_entries: int = DEFAULT_PAGE_CACHE_ENTRIES,
        max_bytes: int = DEFAULT_PAGE_CACHE_BYTES,
        max_page_bytes: int = DEFAULT_PAGE_CACHE_PAGE_BYTES,
    ) -> None:
        if max_entries < 1 or max_bytes < 1 or max_page_bytes < 1:
            raise ValueError(
                "max_entries, max_bytes and max_page_bytes must be >= 1, got "
                f"{max_entries}, {max_bytes}, {max_page_bytes}."
            )
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_page_bytes = min(max_page_bytes, max_bytes)
        self._entries: OrderedDict[bytes, CachedPage] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Number of pages kept."""
        return len(self._entries)

    @property
    def size(self) -> int:
        """JSON bytes counted against ``max_bytes`` now."""
        return self._size

    def get(self, key: bytes) -> CachedPage | None:
        """The page kept for this request (now the most recently used), or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: bytes, etag: str, page: PaginatedResult[Span], answer_bytes: int) -> None:
        """Keep `page`'s spans for this request (replacing any older page); a too big page is dropped."""
        size = answer_bytes + len(key)
        entry = CachedPage(etag, tuple(page.items), page.limit, page.offset, page.total, size)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._size -= old.size
            if size > self.max_page_bytes:
                return
            entries = self._entries
            while entries and (len(entries) >= self.max_entries or self._size + size > self.max_bytes):
                self._size -= entries.popitem(last=False)[1].size
            entries[key] = entry
            self._size += size

    def discard(self, key: bytes) -> None:
        """Forget the page kept for this request, if any."""
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._size -= old.size

    def clear(self) -> None:
        """Forget every page."""
        with self._lock:
            self._entries.clear()
            self._size = 0
