"""Recording never slows or breaks the agent; store failures are counted and surfaced, never silent."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import aiohttp

from agl_core.llm_proxy import LLMProxy
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import Span
from agl_testing.fake_openai import FakeOpenAIServer
from tests.llm_proxy.conftest import Rollout, chat


class BatchRejectingStore(InMemoryLightningStore):
    """A store whose batch insert fails (as a remote store might, mid-outage); single inserts work."""

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        raise ConnectionError("store connection reset")


class DownStore(InMemoryLightningStore):
    """A store that is unreachable for sequence ids and spans."""

    async def get_many_span_sequence_ids(
        self, rollout_attempt_ids: Sequence[tuple[str, str]]
    ) -> Sequence[int]:
        raise ConnectionError("store is down")

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        raise ConnectionError("store is down")

    async def add_span(self, span: Span) -> Span | None:
        raise ConnectionError("store is down")


async def test_a_failed_batch_is_retried_span_by_span(
    backend_a: FakeOpenAIServer, http: aiohttp.ClientSession
) -> None:
    store = BatchRejectingStore()
    started = await store.start_rollout(input=1)
    async with LLMProxy({"m": backend_a.base_url}, store=store) as proxy:
        url = proxy.as_resource(started.rollout_id, started.attempt.attempt_id).endpoint + "/chat/completions"
        for n in range(3):
            async with http.post(url, json=chat(f"n{n}")) as response:
                assert response.status == 200
        assert await proxy.flush(timeout=5)
        stats = proxy.stats()
    assert stats["spans_written"] == 3 and stats["spans_failed"] == 0
    assert stats["store_errors"] >= 1 and "store connection reset" in stats["last_store_error"]
    assert len(await store.query_spans(started.rollout_id)) == 3


async def test_an_unreachable_store_never_fails_the_agent_and_is_surfaced(
    backend_a: FakeOpenAIServer, http: aiohttp.ClientSession
) -> None:
    store = DownStore()
    started = await store.start_rollout(input=1)
    async with LLMProxy({"m": backend_a.base_url}, store=store) as proxy:
        url = proxy.as_resource(started.rollout_id, started.attempt.attempt_id).endpoint + "/chat/completions"
        async with http.post(url, json=chat("still answered")) as response:
            assert response.status == 200
            assert (await response.json())["choices"][0]["message"]["content"] == "still answered"
        assert await proxy.flush(timeout=5)
        stats = proxy.stats()
    assert stats["sequence_id_errors"] == 1
    assert stats["spans_failed"] == 1 and stats["spans_written"] == 0
    assert stats["last_store_error"] == "ConnectionError: store is down"


async def test_spans_for_an_unknown_rollout_are_counted_as_failed(
    proxy: LLMProxy, store: InMemoryLightningStore, rollout: Rollout, http: aiohttp.ClientSession
) -> None:
    for rollout_id, attempt_id in ((rollout.rollout_id, rollout.attempt_id), ("ro-missing", "at-missing")):
        url = proxy.as_resource(rollout_id, attempt_id).endpoint + "/chat/completions"
        async with http.post(url, json=chat("x")) as response:
            assert response.status == 200
    assert await proxy.flush(timeout=5)
    stats = proxy.stats()
    assert stats["spans_written"] == 1 and stats["spans_failed"] == 1
    assert "ro-missing" in stats["last_store_error"]
    assert len(await store.query_spans(rollout.rollout_id)) == 1


class GatedStore(InMemoryLightningStore):
    """A store whose batch inserts wait until the test opens the gate (a store that fell behind)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        await self.gate.wait()
        return await super().add_many_spans(spans)


async def test_a_full_queue_drops_new_spans_and_counts_them(
    backend_a: FakeOpenAIServer, http: aiohttp.ClientSession
) -> None:
    store = GatedStore()
    started = await store.start_rollout(input=1)
    async with LLMProxy({"m": backend_a.base_url}, store=store, max_pending_spans=1) as proxy:
        url = proxy.as_resource(started.rollout_id, started.attempt.attempt_id).endpoint + "/chat/completions"
        for _ in range(20):  # the agent is never slowed down by the stuck store
            async with http.post(url, json=chat("x")) as response:
                assert response.status == 200
        stuck = proxy.stats()
        store.gate.set()
        assert await proxy.flush(timeout=5)
        stats = proxy.stats()
    assert stuck["spans_dropped"] >= 18
    assert stats["spans_written"] + stats["spans_dropped"] == 20
    assert len(await store.query_spans(started.rollout_id)) == stats["spans_written"]
