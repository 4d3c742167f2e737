"""OtelTracer: attribution, streaming to the store, the bounded flush, failures, lifecycle errors."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace as trace_api

from agl_core.emitter import emit_message, emit_reward, operation
from agl_core.semconv import LightningResourceAttributes
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer import get_active_tracer
from agl_core.tracer.otel import OtelTracer
from agl_core.types import Span
from tests.tracer._helpers import new_attempt


async def stored(store: InMemoryLightningStore, rollout_id: str) -> list[Span]:
    return list(await store.query_spans(rollout_id))


async def wait_until_stored(store: InMemoryLightningStore, rollout_id: str, count: int) -> list[Span]:
    """Poll (yielding to the loop) until the rollout has ``count`` spans; bounded by 5 s."""

    async def poll() -> list[Span]:
        while len(spans := await stored(store, rollout_id)) < count:
            await asyncio.sleep(0.001)
        return spans

    return await asyncio.wait_for(poll(), 5.0)


async def test_spans_reach_store_with_ids_and_increasing_sequence(
    tracer: OtelTracer, store: InMemoryLightningStore
) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context("agent", rollout_id=rollout_id, attempt_id=attempt_id):
        with operation(name="plan"):
            emit_message("thinking")
        emit_reward(0.5)
    spans = await stored(store, rollout_id)
    assert [s.name for s in spans] == [
        "agentlightning.message",
        "agentlightning.operation",
        "agentlightning.annotation",
    ]
    assert {(s.rollout_id, s.attempt_id) for s in spans} == {(rollout_id, attempt_id)}
    assert [s.sequence_id for s in spans] == sorted({s.sequence_id for s in spans})
    message, op, _ = spans
    assert message.parent_id == op.span_id
    assert op.resource.attributes[LightningResourceAttributes.TRACER_NAME.value] == "otel"
    assert [s.span_id for s in tracer.get_last_trace()] == [s.span_id for s in spans]
    report = tracer.get_last_export_report()
    assert report is not None and report.ok and report.spans_stored == 3


async def test_flush_guarantee_covers_child_tasks_and_threads(
    tracer: OtelTracer, store: InMemoryLightningStore
) -> None:
    rollout_id, attempt_id = await new_attempt(store)

    def in_thread(i: int) -> None:
        emit_reward(float(i))

    async def in_task(i: int) -> None:
        await asyncio.sleep(0)
        emit_message(f"task {i}")

    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        await asyncio.gather(*(in_task(i) for i in range(5)))
        await asyncio.gather(*(asyncio.to_thread(in_thread, i) for i in range(5)))
        for i in range(200):
            emit_message(f"burst {i}")
    # No waiting: everything is in the store the moment the context returns.
    spans = await stored(store, rollout_id)
    assert len(spans) == 210
    assert len({s.sequence_id for s in spans}) == 210


async def test_sender_streams_while_the_context_is_open(
    tracer: OtelTracer, store: InMemoryLightningStore
) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        emit_message("first")
        spans = await wait_until_stored(store, rollout_id, 1)
        assert spans[0].attributes["agentlightning.message.body"] == "first"


class CountingStore(InMemoryLightningStore):
    """Records the size of every add_many_spans batch."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        self.batches.append(len(spans))
        return await super().add_many_spans(spans)


async def test_spans_are_sent_in_batches() -> None:
    store = CountingStore()
    tracer = OtelTracer(batch_size=512, instrument_llm_clients=False)
    tracer.init_worker(0, store)
    try:
        rollout_id, attempt_id = await new_attempt(store)
        async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
            for i in range(1000):  # no await: the sender only runs at the flush
                emit_message(str(i))
        assert store.batches == [512, 488]
        assert len(await stored(store, rollout_id)) == 1000
    finally:
        tracer.teardown_worker(0)


class FailingStore(InMemoryLightningStore):
    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        raise ConnectionError("store is down")


async def test_store_failure_is_reported_and_spans_kept(caplog: pytest.LogCaptureFixture) -> None:
    store = FailingStore()
    tracer = OtelTracer(instrument_llm_clients=False)
    tracer.init_worker(0, store)
    try:
        rollout_id, attempt_id = await new_attempt(store)
        with caplog.at_level(logging.ERROR):
            async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
                emit_reward(1.0)
                emit_message("x")
        assert [s.name for s in tracer.get_last_trace()] == [
            "agentlightning.annotation",
            "agentlightning.message",
        ]
        report = tracer.get_last_export_report()
        assert report is not None and not report.ok
        assert report.spans_failed == 2 and report.spans_stored == 0
        assert "store is down" in report.errors[0]
        assert "rejected 2 span(s)" in caplog.text
    finally:
        tracer.teardown_worker(0)


class StuckStore(InMemoryLightningStore):
    """add_many_spans never returns (until the test ends)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        await self.release.wait()
        return await super().add_many_spans(spans)


async def test_flush_is_bounded_by_flush_timeout(caplog: pytest.LogCaptureFixture) -> None:
    store = StuckStore()
    tracer = OtelTracer(flush_timeout=0.2, instrument_llm_clients=False)
    tracer.init_worker(0, store)
    try:
        rollout_id, attempt_id = await new_attempt(store)
        with caplog.at_level(logging.ERROR):
            async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
                emit_message("stuck")
        report = tracer.get_last_export_report()
        assert report is not None and report.timed_out and report.spans_stored == 0
        assert [s.name for s in tracer.get_last_trace()] == ["agentlightning.message"]
        assert "did not reach the store within 0.2s" in caplog.text
    finally:
        store.release.set()
        tracer.teardown_worker(0)


async def test_span_ended_after_exit_is_sent_late_and_reported(
    tracer: OtelTracer, store: InMemoryLightningStore, caplog: pytest.LogCaptureFixture
) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id) as otel:
        straggler = otel.start_span("still-running")
    assert await stored(store, rollout_id) == []
    with caplog.at_level(logging.WARNING):
        straggler.end()
    spans = await wait_until_stored(store, rollout_id, 1)
    assert spans[0].name == "still-running"
    report = tracer.get_last_export_report()
    assert report is not None and report.late_spans == 1
    assert "after trace_context" in caplog.text


async def test_span_started_in_a_thread_with_propagated_otel_context_joins_its_parent(
    tracer: OtelTracer, store: InMemoryLightningStore
) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id) as otel:
        with otel.start_as_current_span("parent"):
            ctx = otel_context.get_current()

            def worker() -> None:  # a raw thread: agl's contextvars are not inherited, OTel's is attached
                token = otel_context.attach(ctx)
                try:
                    otel.start_span("child").end()
                finally:
                    otel_context.detach(token)

            thread = threading.Thread(target=worker)
            thread.start()
            thread.join(5)
    names = {s.name for s in await stored(store, rollout_id)}
    assert names == {"parent", "child"}


async def test_raw_thread_without_context_is_not_attributed(
    tracer: OtelTracer, store: InMemoryLightningStore
) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            emit_reward(1.0)
        except RuntimeError as exc:
            errors.append(exc)

    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join(5)
    assert await stored(store, rollout_id) == []
    assert "No active tracer found" in str(errors[0])


async def test_local_trace_without_ids_keeps_spans_locally(
    tracer: OtelTracer, store: InMemoryLightningStore
) -> None:
    async with tracer.trace_context("local"):
        emit_reward(2.0)
    (span,) = tracer.get_last_trace()
    assert (span.rollout_id, span.attempt_id, span.sequence_id) == ("rollout-dummy", "attempt-dummy", 1)
    assert (await store.statistics())["total_spans"] == 0


async def test_active_tracer_is_set_only_inside_trace_context(tracer: OtelTracer) -> None:
    assert get_active_tracer() is None
    async with tracer.trace_context():
        assert get_active_tracer() is tracer
    assert get_active_tracer() is None


async def test_argument_and_lifecycle_errors(store: InMemoryLightningStore) -> None:
    tracer = OtelTracer(instrument_llm_clients=False)
    with pytest.raises(RuntimeError, match="Call init_worker"):
        async with tracer.trace_context():
            pass
    tracer.init_worker(0)  # no store
    try:
        with pytest.raises(ValueError, match="both or neither"):
            async with tracer.trace_context(rollout_id="ro-1"):
                pass
        with pytest.raises(ValueError, match="store is required"):
            async with tracer.trace_context(rollout_id="ro-1", attempt_id="at-1"):
                pass
        rollout_id, attempt_id = await new_attempt(store)
        with pytest.warns(DeprecationWarning, match="deprecated"):
            async with tracer.trace_context(store=store, rollout_id=rollout_id, attempt_id=attempt_id):
                emit_reward(1.0)
        assert len(await stored(store, rollout_id)) == 1
        assert get_active_tracer() is None
    finally:
        tracer.teardown_worker(0)
    with pytest.raises(ValueError, match="flush_timeout"):
        OtelTracer(flush_timeout=0)


async def test_exception_in_body_propagates_and_spans_are_still_flushed(
    tracer: OtelTracer, store: InMemoryLightningStore
) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    with pytest.raises(KeyError):
        async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
            emit_message("before failure")
            raise KeyError("agent crashed")
    assert [s.name for s in await stored(store, rollout_id)] == ["agentlightning.message"]


def test_own_provider_is_never_the_global_one(store: InMemoryLightningStore) -> None:
    tracer = OtelTracer(instrument_llm_clients=False)
    with tracer.lifespan(store):
        assert tracer.tracer_provider is not None
        assert trace_api.get_tracer_provider() is not tracer.tracer_provider
        global_after = trace_api.get_tracer_provider()
    assert tracer.tracer_provider is None
    assert trace_api.get_tracer_provider() is global_after  # teardown leaves the global provider in place


async def test_create_span_at_timestamp_and_operation_context(tracer: OtelTracer) -> None:
    async with tracer.trace_context():
        fields = tracer.create_span("point", {"a": 1}, timestamp=1_700_000_000.5)
        with pytest.raises(ZeroDivisionError), tracer.operation_context("op", {"b": "x"}) as recording:
            recording.record_attributes({"c": 2})
            _ = 1 / 0
    assert fields.start_time == fields.end_time == pytest.approx(1_700_000_000.5)
    point, op = tracer.get_last_trace()
    assert point.start_time == pytest.approx(1_700_000_000.5)
    assert op.status.status_code == "ERROR"
    assert op.attributes["exception.type"] == "ZeroDivisionError"
    assert op.attributes["c"] == 2 and op.attributes["b"] == "x"
    assert recording.get_recorded_span().status.status_code == "ERROR"
