"""Remember the answers of recent mutating requests, so a retried request is not applied twice.

The client sends an ``Idempotency-Key`` header with every mutating request and keeps it across
retries. When the first answer is lost (connection reset, timeout) and the request is retried, the
server replays the remembered answer instead of, say, enqueueing the rollouts a second time. A retry
that arrives while the first request is still running waits for it. Bounded by entry count and bytes
(oldest first); kept in memory, so it covers lost answers within one server lifetime.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["CachedResponse", "IdempotencyCache"]


@dataclass(frozen=True)
class CachedResponse:
    """A remembered answer: status, JSON body bytes."""

    status: int
    body: bytes


class IdempotencyCache:
    """Bounded LRU of answers by idempotency key, with waiting for in-flight duplicates.

    Cheap on the common path (a key seen once): `begin` and `finish` are a few dict operations; a
    future is created only for a duplicate that arrives while the first request still runs.
    """

    def __init__(self, max_entries: int = 10_000, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._done: OrderedDict[object, CachedResponse] = OrderedDict()
        self._running: dict[object, list[asyncio.Future[CachedResponse | None]]] = {}
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._done)

    def known(self, key: object) -> bool:
        """True if `key` has a remembered answer or a request with it is running."""
        return key in self._done or key in self._running

    async def lookup(self, key: object) -> CachedResponse | None:
        """The remembered answer for `key`; waits for a running request with the same key first.

        None means "run the request": the key is new, or the first request with it failed.
        """
        hit = self._done.get(key)
        if hit is not None:
            self._done.move_to_end(key)
            return hit
        waiters = self._running.get(key)
        if waiters is None:
            return None
        future: asyncio.Future[CachedResponse | None] = asyncio.get_running_loop().create_future()
        waiters.append(future)
        return await asyncio.shield(future)

    def begin(self, key: object) -> None:
        """Mark `key` as running (duplicates arriving now wait for `finish`)."""
        self._running[key] = []

    def finish(self, key: object, response: CachedResponse | None) -> None:
        """Store the answer for `key` (None: the request failed and a retry must run again)."""
        for future in self._running.pop(key, ()):
            if not future.done():
                future.set_result(response)
        if response is None or len(response.body) > self.max_bytes:
            return
        self._done[key] = response
        self._bytes += len(response.body)
        if len(self._done) > self.max_entries or self._bytes > self.max_bytes:
            while len(self._done) > self.max_entries or self._bytes > self.max_bytes:
                _, evicted = self._done.popitem(last=False)
                self._bytes -= len(evicted.body)
