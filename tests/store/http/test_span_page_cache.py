"""Conditional span queries: the server's ETags and 304 answers, and the client's cache of span pages."""

from __future__ import annotations

import asyncio
import json
import pickle
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest
from aiohttp import web

from agl_core.store import open_store
from agl_core.store.http import BackgroundServer, LightningStoreClient
from agl_core.store.http.etags import none_match_hits
from agl_core.store.http.openapi import openapi_document
from agl_core.store.http.page_cache import SpanPageCache
from agl_core.store.http.server import LightningStoreServer
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import PaginatedResult, Span

from ._support import server_process


def _span(rollout_id: str, attempt_id: str, seq: int, name: str = "chat") -> Span:
    return Span.from_attributes(
        attributes={"gen_ai.system": "openai", "n": seq},
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        sequence_id=seq,
        span_id=f"{seq:016x}",
        name=name,
        start_time=float(seq),
        end_time=float(seq) + 0.5,
    )


def _post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, bytes, str]:
    """POST JSON with urllib; ``(status, body, ETag)`` (a 304 too)."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
        method="POST",
    )
    return _open(request)


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes, str]:
    return _open(urllib.request.Request(url, headers=headers or {}))


def _open(request: urllib.request.Request) -> tuple[int, bytes, str]:
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read(), answer.headers.get("ETag", "")
    except urllib.error.HTTPError as error:  # urllib raises for 304
        with error:
            return error.code, error.read(), error.headers.get("ETag", "")


async def _rollout_with_spans(store: Any, count: int) -> tuple[str, str, list[Span]]:
    started = await store.start_rollout({"task": 1})
    rollout_id, attempt_id = started.rollout_id, started.attempt.attempt_id
    spans = [_span(rollout_id, attempt_id, seq) for seq in range(1, count + 1)]
    await store.add_many_spans(spans)
    return rollout_id, attempt_id, spans


# ---------------------------------------------------------------------------------------------- server


def test_a_served_span_page_has_an_etag_and_a_matching_request_gets_304_without_a_body() -> None:
    """Against ``agl store serve`` in its own process: POST and GET, plain, weak, listed and ``*``."""
    with server_process("memory:") as (url, _):
        client = LightningStoreClient(url, cache_span_pages=False)

        async def fill() -> tuple[str, str, list[Span]]:
            try:
                return await _rollout_with_spans(client, 3)
            finally:
                await client.close()

        rollout_id, _, _ = asyncio.run(fill())
        search = f"{url}/v1/agl/spans/search"
        status, body, etag = _post(search, {"rollout_id": rollout_id})
        assert status == 200 and len(json.loads(body)["items"]) == 3
        assert etag.startswith('"') and etag.endswith('"') and len(etag) == 34  # strong, 128 bits
        assert _post(search, {"rollout_id": rollout_id})[2] == etag  # the same answer, the same ETag
        for header in (etag, f"W/{etag}", f'"other", {etag}', "*"):
            assert _post(search, {"rollout_id": rollout_id}, {"If-None-Match": header}) == (304, b"", etag)
        status, body, _ = _post(search, {"rollout_id": rollout_id}, {"If-None-Match": '"other"'})
        assert status == 200 and len(json.loads(body)["items"]) == 3
        # Another query is another answer with another ETag.
        status, body, other = _post(search, {"rollout_id": rollout_id, "limit": 1})
        assert status == 200 and other != etag and len(json.loads(body)["items"]) == 1
        assert _post(search, {"rollout_id": rollout_id, "limit": 1}, {"If-None-Match": etag})[0] == 200
        # The GET route answers the same page with the same ETag, and 304 as well.
        listed = f"{url}/v1/agl/spans?rollout_id={rollout_id}"
        assert _get(listed)[2] == etag
        assert _get(listed, {"If-None-Match": etag}) == (304, b"", etag)


def test_none_match_hits_follows_the_rfc() -> None:
    assert none_match_hits('"a"', '"a"')
    assert none_match_hits('W/"a"', '"a"')  # If-None-Match compares weakly
    assert none_match_hits('"b" , "a"', '"a"')
    assert none_match_hits("*", '"a"')
    assert not none_match_hits('"b"', '"a"')
    assert not none_match_hits('"a', '"a"')
    assert not none_match_hits("", '"a"')


# ---------------------------------------------------------------------------------------------- client


class CountingServer:
    """A `LightningStoreServer` over a fresh memory store on this event loop that records each span
    query's ``If-None-Match`` and status, optionally with the ``ETag`` header dropped (an older server)."""

    def __init__(self, *, send_etags: bool = True) -> None:
        self.store = InMemoryLightningStore()
        self.server = LightningStoreServer(self.store, port=0)
        self.exchanges: list[tuple[str | None, int]] = []
        self.send_etags = send_etags
        self.server.app.on_response_prepare.append(self._record)

    async def _record(self, request: web.Request, response: web.StreamResponse) -> None:
        if request.path == "/v1/agl/spans/search":
            self.exchanges.append((request.headers.get("If-None-Match"), response.status))
            if not self.send_etags:
                response.headers.popall("ETag", None)

    async def __aenter__(self) -> CountingServer:
        await self.server.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.server.stop()

    def statuses(self) -> list[int]:
        """Statuses of the span queries so far; forgets them."""
        statuses = [status for _, status in self.exchanges]
        self.exchanges.clear()
        return statuses


async def test_a_repeated_query_is_revalidated_and_answers_the_kept_spans() -> None:
    async with CountingServer() as served:
        client = LightningStoreClient(served.server.endpoint)
        try:
            rollout_id, _, spans = await _rollout_with_spans(client, 5)
            first = await client.query_spans(rollout_id)
            again = await client.query_spans(rollout_id)
            assert list(first) == spans and list(again) == spans
            assert [(known is not None, status) for known, status in served.exchanges] == [
                (False, 200),
                (True, 304),
            ]
            # The spans are shared (read-only, as the local stores answer); the pages are not.
            assert all(a is b for a, b in zip(first.items, again.items, strict=True))
            assert again is not first and again.items is not first.items
            assert isinstance(again, PaginatedResult)
            assert (again.limit, again.offset, again.total) == (-1, 0, 5)
            assert again == first
            again.items.clear()  # a caller changing its page does not change the kept one
            assert list(await client.query_spans(rollout_id)) == spans
        finally:
            await client.close()


async def test_a_changed_page_is_answered_in_full_never_stale() -> None:
    async with CountingServer() as served:
        client = LightningStoreClient(served.server.endpoint)
        try:
            rollout_id, attempt_id, spans = await _rollout_with_spans(client, 3)
            paged = await client.query_spans(rollout_id, limit=2)
            assert list(await client.query_spans(rollout_id)) == spans
            assert served.statuses() == [200, 200]
            # A new span written by someone else (straight into the served store).
            extra = _span(rollout_id, attempt_id, 4)
            await served.store.add_span(extra)
            assert list(await client.query_spans(rollout_id)) == [*spans, extra]
            # The first page holds the same spans, but its total changed: also answered in full.
            page = await client.query_spans(rollout_id, limit=2)
            assert list(page) == list(paged) and (paged.total, page.total) == (3, 4)
            assert served.statuses() == [200, 200]
            assert list(await client.query_spans(rollout_id)) == [*spans, extra]
            assert served.statuses() == [304]
            # "latest" follows a new attempt at once.
            assert len(await client.query_spans(rollout_id, "latest")) == 4
            retry = await client.start_attempt(rollout_id)
            assert len(await client.query_spans(rollout_id, "latest")) == 0
            newer = _span(rollout_id, retry.attempt.attempt_id, 5)
            await client.add_span(newer)
            assert list(await client.query_spans(rollout_id, "latest")) == [newer]
            assert served.statuses() == [200, 200, 200]
        finally:
            await client.close()


async def test_different_queries_are_different_entries_with_the_same_answers_as_without_cache() -> None:
    async with CountingServer() as served:
        cached = LightningStoreClient(served.server.endpoint)
        plain = LightningStoreClient(served.server.endpoint, cache_span_pages=False)
        try:
            rollout_id, attempt_id, _ = await _rollout_with_spans(cached, 6)
            retry = await cached.start_attempt(rollout_id)
            await cached.add_span(_span(rollout_id, retry.attempt.attempt_id, 7, name="tool"))
            other_id, _, _ = await _rollout_with_spans(cached, 2)
            queries: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
                ((rollout_id,), {}),
                ((other_id,), {}),
                ((rollout_id, attempt_id), {}),
                ((rollout_id, retry.attempt.attempt_id), {}),
                ((rollout_id, "latest"), {}),
                ((rollout_id,), {"name": "tool"}),
                ((rollout_id,), {"name_contains": "ch"}),
                ((rollout_id,), {"name": "tool", "span_id": f"{2:016x}", "filter_logic": "or"}),
                ((rollout_id,), {"limit": 2}),
                ((rollout_id,), {"limit": 2, "offset": 2}),
                ((rollout_id,), {"sort_order": "desc"}),
                ((rollout_id,), {"sort_by": "name"}),
                (("ro-unknown",), {}),
            ]
            for _ in range(2):
                for args, kwargs in queries:
                    got = await cached.query_spans(*args, **kwargs)
                    expected = await plain.query_spans(*args, **kwargs)
                    assert (list(got), got.total, got.limit, got.offset) == (
                        list(expected),
                        expected.total,
                        expected.limit,
                        expected.offset,
                    ), (args, kwargs)
            revalidated = [status for known, status in served.exchanges if known is not None]
            assert revalidated == [304] * len(queries)  # the second round, one per query
            assert len(cached._span_pages or ()) == len(queries)
        finally:
            await cached.close()
            await plain.close()


async def test_without_the_cache_every_query_is_answered_in_full() -> None:
    async with CountingServer() as served:
        client = open_store(served.server.endpoint, cache_span_pages=False)
        assert isinstance(client, LightningStoreClient) and client._span_pages is None
        try:
            rollout_id, _, spans = await _rollout_with_spans(client, 3)
            first = await client.query_spans(rollout_id)
            again = await client.query_spans(rollout_id)
            assert list(first) == list(again) == spans
            assert first.items[0] is not again.items[0]
            assert served.exchanges == [(None, 200), (None, 200)]
            clone = pickle.loads(pickle.dumps(client))
            assert clone.cache_span_pages is False and clone._span_pages is None
        finally:
            await client.close()
    assert pickle.loads(pickle.dumps(LightningStoreClient("http://127.0.0.1:1"))).cache_span_pages is True


async def test_a_server_without_etags_is_never_sent_if_none_match() -> None:
    async with CountingServer(send_etags=False) as served:
        client = LightningStoreClient(served.server.endpoint)
        try:
            rollout_id, attempt_id, spans = await _rollout_with_spans(client, 3)
            for _ in range(3):
                assert list(await client.query_spans(rollout_id)) == spans
            extra = _span(rollout_id, attempt_id, 4)
            await served.store.add_span(extra)
            assert list(await client.query_spans(rollout_id)) == [*spans, extra]
            assert served.exchanges == [(None, 200)] * 4
            assert len(client._span_pages or ()) == 0
        finally:
            await client.close()


def test_one_client_revalidates_from_several_threads_and_event_loops() -> None:
    with BackgroundServer(InMemoryLightningStore) as server:
        client = LightningStoreClient(server.endpoint)
        rollout_id, _, spans = asyncio.run(_rollout_with_spans(client, 4))
        failures: list[BaseException] = []

        def reader() -> None:
            async def read() -> None:
                for limit in (-1, 1, 2, 3) * 10:
                    page = await client.query_spans(rollout_id, limit=limit)
                    assert list(page) == (spans if limit == -1 else spans[:limit])

            try:
                asyncio.run(read())
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=reader) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        asyncio.run(client.close())
        assert not failures and not any(thread.is_alive() for thread in threads)


# ---------------------------------------------------------------------------------------------- bounds


def _page(size: int) -> PaginatedResult[Span]:
    spans = [_span("ro-1", "at-1", seq) for seq in range(1, size + 1)]
    return PaginatedResult[Span](items=spans, limit=-1, offset=0, total=size)


def test_the_cache_is_bounded_by_entries_least_recently_used_first_out() -> None:
    cache = SpanPageCache(max_entries=3, max_bytes=10_000, max_page_bytes=1_000)
    for key in (b"a", b"b", b"c"):
        cache.put(key, f'"{key.decode()}"', _page(1), 100)
    assert cache.get(b"a") is not None  # now the most recently used
    cache.put(b"d", '"d"', _page(1), 100)
    assert [key for key in (b"a", b"b", b"c", b"d") if cache.get(key) is not None] == [b"a", b"c", b"d"]
    assert len(cache) == 3 and cache.size == 3 * 101


def test_the_cache_is_bounded_by_bytes_and_keeps_no_oversized_page() -> None:
    cache = SpanPageCache(max_entries=100, max_bytes=1_000, max_page_bytes=400)
    one = _page(1)
    for index in range(10):
        cache.put(b"k%d" % index, '"e"', one, 300 - 2)  # 300 bytes with its 2-byte key
        assert cache.size <= 1_000
    assert len(cache) == 3 and [cache.get(b"k%d" % i) is not None for i in (6, 7, 8, 9)] == [
        False,
        True,
        True,
        True,
    ]
    cache.put(b"k9", '"f"', _page(2), 500)  # too big: dropped, the old page for the key too
    assert cache.get(b"k9") is None and len(cache) == 2 and cache.size == 600
    entry = cache.get(b"k8")
    assert entry is not None and entry.etag == '"e"' and list(entry.page()) == list(one)
    cache.discard(b"k8")
    cache.clear()
    assert len(cache) == 0 and cache.size == 0
    with pytest.raises(ValueError, match="max_entries"):
        SpanPageCache(max_entries=0)


async def test_a_client_keeps_at_most_its_bound_of_pages() -> None:
    async with CountingServer() as served:
        client = LightningStoreClient(served.server.endpoint)
        cache = client._span_pages
        assert cache is not None
        cache.max_entries = 4  # the bound of a real client, made small
        try:
            rollout_id, _, spans = await _rollout_with_spans(client, 6)
            for limit in range(1, 7):
                assert list(await client.query_spans(rollout_id, limit=limit)) == spans[:limit]
            assert len(cache) == 4
            served.exchanges.clear()
            for limit in (3, 4, 5, 6, 1, 2):  # 1 and 2 were pushed out by the later ones
                await client.query_spans(rollout_id, limit=limit)
            assert served.statuses() == [304, 304, 304, 304, 200, 200]
        finally:
            await client.close()


def test_the_openapi_document_describes_the_conditional_span_queries() -> None:
    paths = openapi_document()["paths"]
    for path, method in (("/v1/agl/spans/search", "post"), ("/v1/agl/spans", "get")):
        operation = paths[path][method]
        assert "If-None-Match" in [p["name"] for p in operation["parameters"] if p["in"] == "header"]
        assert "ETag" in operation["responses"]["200"]["headers"]
        assert "content" not in operation["responses"]["304"]
    assert "304" not in paths["/v1/agl/rollouts/search"]["post"]["responses"]
