"""`IdempotencyCache`: replay, waiting for a running duplicate, re-running after a failure, bounds."""

from __future__ import annotations

import asyncio

from agl_core.store.http.idempotency import CachedResponse, IdempotencyCache


async def test_remembered_answer_is_replayed() -> None:
    cache = IdempotencyCache()
    assert not cache.known("k") and await cache.lookup("k") is None
    cache.begin("k")
    cache.finish("k", CachedResponse(201, b"[1]"))
    assert cache.known("k")
    assert await cache.lookup("k") == CachedResponse(201, b"[1]")


async def test_duplicate_waits_for_the_running_request() -> None:
    cache = IdempotencyCache()
    cache.begin("k")
    waiter = asyncio.create_task(cache.lookup("k"))
    await asyncio.sleep(0)
    assert not waiter.done()  # the first request is still running
    cache.finish("k", CachedResponse(200, b"{}"))
    assert await asyncio.wait_for(waiter, 5) == CachedResponse(200, b"{}")


async def test_failed_request_is_not_remembered() -> None:
    cache = IdempotencyCache()
    cache.begin("k")
    waiter = asyncio.create_task(cache.lookup("k"))
    await asyncio.sleep(0)
    cache.finish("k", None)
    assert await asyncio.wait_for(waiter, 5) is None  # the retry must run itself
    assert not cache.known("k")


async def test_bounded_by_entries_and_bytes_oldest_first() -> None:
    cache = IdempotencyCache(max_entries=3, max_bytes=10)
    for key in "abcd":
        cache.begin(key)
        cache.finish(key, CachedResponse(200, b"12"))
    assert len(cache) == 3 and not cache.known("a") and cache.known("d")
    cache.begin("big")
    cache.finish("big", CachedResponse(200, b"x" * 9))
    assert cache.known("big") and len(cache) == 1  # older entries went to stay under 10 bytes
    cache.begin("huge")
    cache.finish("huge", CachedResponse(200, b"x" * 11))
    assert not cache.known("huge")  # larger than the whole budget: not kept
