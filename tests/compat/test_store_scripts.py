"""0.3-style store scripts: a server wrapping a store, a client talking to it, custom and wrapped stores."""

from __future__ import annotations

import abc
import warnings
from typing import Any

import pytest

import agl_core as agl


async def test_minimal_store_script_server_is_a_store() -> None:
    store = agl.InMemoryLightningStore()
    server = agl.LightningStoreServer(store, "127.0.0.1", 0)
    assert isinstance(server, agl.LightningStore)
    await server.start()
    client = agl.LightningStoreClient(server.endpoint)
    try:
        rollout = await client.enqueue_rollout(input={"question": "1+1?"}, mode="train")
        attempted = await client.dequeue_rollout(worker_id="w1")
        assert attempted is not None and attempted.rollout_id == rollout.rollout_id
        span = agl.Span.from_attributes(
            attributes={"gen_ai.request.model": "m"},
            rollout_id=rollout.rollout_id,
            attempt_id=attempted.attempt.attempt_id,
            sequence_id=3,
            name="chat m",
        )
        await client.add_span(span)
        # the server object answers like the store it serves (0.3: LightningStoreServer is a store)
        stored = list(await server.query_spans(rollout.rollout_id))
        assert [s.model_dump() for s in stored] == [
            span.model_dump()
        ]  # a span given to a store is kept as is
        stats = await server.statistics()
        assert stats["total_rollouts"] == 1 and stats["total_spans"] == 1
    finally:
        await client.close()
        await server.stop()


async def test_minimal_tracer_script_spans_over_http_carry_their_ids_in_the_resource() -> None:
    store = agl.InMemoryLightningStore()
    server = agl.LightningStoreServer(store, "127.0.0.1", 0)
    await server.start()
    client = agl.LightningStoreClient(server.endpoint)
    tracer = agl.OtelTracer()
    try:
        rollout = await client.start_rollout(input="x")
        tracer.init_worker(0, client)
        async with tracer.trace_context(
            "demo", rollout_id=rollout.rollout_id, attempt_id=rollout.attempt.attempt_id
        ):
            agl.emit_reward(1.0)
        stored = list(await store.query_spans(rollout.rollout_id))
        assert stored and agl.find_final_reward(stored) == 1.0
        for span in stored:
            resource = span.resource.attributes
            assert resource["agentlightning.rollout_id"] == rollout.rollout_id
            assert resource["agentlightning.attempt_id"] == rollout.attempt.attempt_id
            assert resource["agentlightning.span_sequence_id"] == span.sequence_id
    finally:
        tracer.teardown_worker(0)
        await client.close()
        await server.stop()


def test_server_accepts_03_arguments_and_names_what_agl_cannot_do() -> None:
    store = agl.InMemoryLightningStore()
    server = agl.LightningStoreServer(store, port=None, cors_allow_origins="*", launch_mode="thread")
    assert server.port == 4747
    with pytest.raises(ValueError, match="agl store serve"):
        agl.LightningStoreServer(store, launch_mode="mp")
    with pytest.raises(ValueError, match="database store"):
        agl.LightningStoreServer(store, n_workers=4)


def _forward(name: str) -> Any:
    async def method(self: ForwardingStore, *args: Any, **kwargs: Any) -> Any:
        return await getattr(self.inner, name)(*args, **kwargs)

    return method


class ForwardingStore(agl.LightningStore):
    """A 0.3-style custom store: it implements the contract methods 0.2 had, but not ``statistics``."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = agl.InMemoryLightningStore()


for _name in agl.LightningStore.__abstractmethods__:
    setattr(ForwardingStore, _name, _forward(_name))
abc.update_abstractmethods(ForwardingStore)


async def test_custom_store_without_statistics_instantiates_and_counts() -> None:
    assert "statistics" not in agl.LightningStore.__abstractmethods__
    store = ForwardingStore()
    rollout = await store.start_rollout(input="x")
    await store.add_span(
        agl.Span.from_attributes(
            attributes={}, rollout_id=rollout.rollout_id, attempt_id=rollout.attempt.attempt_id, name="s"
        )
    )
    stats = await store.statistics()
    assert (stats["name"], stats["total_rollouts"], stats["total_attempts"], stats["total_spans"]) == (
        "ForwardingStore",
        1,
        1,
        1,
    )


async def test_threaded_wrapper_passes_through() -> None:
    inner = agl.InMemoryLightningStore()
    store = agl.LightningStoreThreaded(inner)
    assert isinstance(store, agl.LightningStore) and store.capabilities["thread_safe"]
    await store.enqueue_rollout(input=1)
    assert len(await inner.query_rollouts()) == 1


def test_store_package_exports_03_names() -> None:
    from agl_core.store import InMemoryLightningStore, LightningStoreClient, LightningStoreServer
    from agl_core.store.client_server import LightningStoreClient as ClientFromModule

    assert ClientFromModule is LightningStoreClient
    assert (
        InMemoryLightningStore is agl.InMemoryLightningStore
        and LightningStoreServer is agl.LightningStoreServer
    )


async def test_store_utils_status_rules_and_watchdog() -> None:
    from agl_core.store.utils import LATENCY_BUCKETS, rollout_status_from_attempt, scan_unhealthy_rollouts

    config = agl.RolloutConfig(max_attempts=2, retry_condition=["failed"], timeout_seconds=0.0)
    store = agl.InMemoryLightningStore()
    started = await store.start_rollout(input=1, config=config)
    failed = started.attempt.model_copy(update={"status": "failed"})
    assert await rollout_status_from_attempt(failed, config) == "requeuing"
    flagged = await scan_unhealthy_rollouts([started])
    assert flagged == {(started.rollout_id, started.attempt.attempt_id): "timeout"}
    assert LATENCY_BUCKETS[0] == 1e-6 and LATENCY_BUCKETS[-1] == 300.0


def test_memory_store_eviction_arguments_name_the_replacement() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agl.InMemoryLightningStore(thread_safe=True, eviction_memory_threshold=None)
    with pytest.raises(ValueError, match="SqliteLightningStore"):
        agl.InMemoryLightningStore(eviction_memory_threshold=0.8)
