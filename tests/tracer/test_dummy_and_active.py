"""DummyTracer (as in Agent Lightning 0.3) and the context-local active-tracer registry."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from agl_core.tracer import DummyTracer, clear_active_tracer, get_active_tracer, set_active_tracer
from agl_core.types import TraceStatus


def test_create_span_uses_timestamp_or_now_and_ok_status() -> None:
    tracer = DummyTracer()
    fields = tracer.create_span("x", {"a": 1}, timestamp=100.0)
    assert (fields.start_time, fields.end_time, fields.status.status_code) == (100.0, 100.0, "OK")
    assert tracer.create_span("y", timestamp=2_000_000_000_000_000_000).start_time == pytest.approx(2e9)
    failed = tracer.create_span("z", status=TraceStatus(status_code="ERROR", description="bad"))
    assert failed.status.description == "bad" and failed.start_time is not None


def test_operation_context_merges_attributes_and_finalizes() -> None:
    tracer = DummyTracer()
    with tracer.operation_context("op", {"a": 1}) as recording:
        recording.record_attributes({"b": 2})
        with pytest.raises(ValueError, match="still recording"):
            recording.get_recorded_span()
    span = recording.get_recorded_span()
    assert span.attributes == {"a": 1, "b": 2}
    assert span.status.status_code == "UNSET" and span.end_time is not None


def test_operation_context_records_exception_and_reraises() -> None:
    tracer = DummyTracer()
    with pytest.raises(RuntimeError, match="boom"), tracer.operation_context("op") as recording:
        raise RuntimeError("boom")
    span = recording.get_recorded_span()
    assert span.status.status_code == "ERROR" and span.status.description == "boom"
    assert span.attributes["exception.type"] == "RuntimeError"
    assert "Traceback" in str(span.attributes["exception.stacktrace"])


async def test_dummy_has_no_trace_context() -> None:
    tracer = DummyTracer()
    with pytest.raises(NotImplementedError):
        async with tracer.trace_context():
            pass
    assert get_active_tracer() is None  # restored even though entering failed
    assert tracer.get_last_trace() == []


def test_set_active_tracer_is_context_local() -> None:
    first, second = DummyTracer(), DummyTracer()
    seen: list[object] = []

    def in_other_context() -> None:
        seen.append(get_active_tracer())
        set_active_tracer(second)
        seen.append(get_active_tracer())

    ctx = contextvars.copy_context()
    ctx.run(set_active_tracer, first)
    assert ctx.run(get_active_tracer) is first
    with pytest.raises(ValueError, match="already set"):
        ctx.run(set_active_tracer, second)
    thread = threading.Thread(target=in_other_context)
    thread.start()
    thread.join(5)
    assert seen == [None, second]  # the thread neither saw nor disturbed ours
    assert ctx.run(get_active_tracer) is first
    ctx.run(clear_active_tracer)
    assert ctx.run(get_active_tracer) is None
    assert get_active_tracer() is None


async def test_tasks_inherit_the_tracer_but_do_not_leak_changes_back() -> None:
    tracer = DummyTracer()

    async def child() -> object:
        clear_active_tracer()
        return get_active_tracer()

    set_active_tracer(tracer)
    try:
        assert await asyncio.create_task(child()) is None
        assert get_active_tracer() is tracer
    finally:
        clear_active_tracer()


def test_lifespan_runs_the_lifecycle() -> None:
    calls: list[str] = []

    class Recording(DummyTracer):
        def init(self, *args: object, **kwargs: object) -> None:
            calls.append("init")

        def teardown_worker(self, worker_id: int, *args: object, **kwargs: object) -> None:
            calls.append(f"teardown_worker {worker_id}")

        def teardown(self, *args: object, **kwargs: object) -> None:
            calls.append("teardown")

    tracer = Recording()
    with tracer.lifespan() as active:
        assert active is tracer and tracer.worker_id == 0
    assert calls == ["init", "teardown_worker 0", "teardown"]
