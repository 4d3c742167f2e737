"""``GET /metrics`` on the store server: scraped over HTTP and parsed with prometheus_client's parser."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from agl_core.store.http import LightningStoreClient, LightningStoreServer
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import Span
from tests.metrics.scrape import scrape, value


@pytest.fixture
async def store() -> AsyncIterator[InMemoryLightningStore]:
    store = InMemoryLightningStore()
    yield store
    await store.close()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def _span(rollout_id: str, attempt_id: str, sequence_id: int) -> Span:
    return Span.from_attributes(
        attributes={}, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=sequence_id, name="s"
    )


async def test_queue_rollouts_spans_and_latency_are_scraped(
    store: InMemoryLightningStore, http: aiohttp.ClientSession
) -> None:
    server = LightningStoreServer(store, port=0)
    await server.start()
    try:
        client = LightningStoreClient(server.endpoint)
        try:
            for i in range(3):
                await client.enqueue_rollout(input={"task": i})
            held = await client.dequeue_rollout(worker_id="w1")
            assert held is not None
            spans = [_span(held.rollout_id, held.attempt.attempt_id, i) for i in range(1, 5)]
            await client.add_many_spans(spans[:3])
            await client.add_span(spans[3])
            await client.add_many_spans(spans[:2])  # duplicates: not counted again
        finally:
            await client.close()

        samples = await scrape(http, server.endpoint + "/metrics")
    finally:
        await server.stop()

    assert value(samples, "agl_store_queue_depth") == 2
    assert value(samples, "agl_store_rollouts", status="queuing") == 2
    assert value(samples, "agl_store_rollouts", status="running") == 1  # its spans made it running
    assert value(samples, "agl_store_rollouts", status="succeeded") == 0
    assert value(samples, "agl_store_spans_added_total") == 4
    assert value(samples, "agl_store_request_duration_seconds_count", route="enqueue_rollouts") == 3
    assert value(samples, "agl_store_request_duration_seconds_count", route="dequeue_rollouts") == 1
    assert value(samples, "agl_store_request_duration_seconds_sum", route="enqueue_rollouts") > 0
    assert (
        value(samples, "agl_store_request_duration_seconds_bucket", route="enqueue_rollouts", le="+Inf") == 3
    )


async def test_metrics_need_the_token_when_the_server_has_one(
    store: InMemoryLightningStore, http: aiohttp.ClientSession
) -> None:
    server = LightningStoreServer(store, port=0, token="s3cret")
    await server.start()
    try:
        async with http.get(server.endpoint + "/metrics") as response:
            assert response.status == 401
            assert "Bearer" in (await response.json())["error"]["message"]
        samples = await scrape(http, server.endpoint + "/metrics", token="s3cret")
        assert value(samples, "agl_store_queue_depth") == 0
    finally:
        await server.stop()


async def test_two_servers_in_one_process_keep_their_own_series(
    store: InMemoryLightningStore, http: aiohttp.ClientSession
) -> None:
    other_store = InMemoryLightningStore()
    first, second = LightningStoreServer(store, port=0), LightningStoreServer(other_store, port=0)
    await first.start()
    await second.start()
    try:
        await store.enqueue_rollout(input={})
        first_samples = await scrape(http, first.endpoint + "/metrics")
        second_samples = await scrape(http, second.endpoint + "/metrics")
    finally:
        await first.stop()
        await second.stop()
        await other_store.close()
    assert value(first_samples, "agl_store_queue_depth") == 1
    assert value(second_samples, "agl_store_queue_depth") == 0
