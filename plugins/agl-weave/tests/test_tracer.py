"""WeaveTracer: the Weave calls of a rollout become spans in the store, with ids, nesting and errors."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
import weave

from agl_core.semconv import LightningResourceAttributes as Resource
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import Span
from agl_weave.instrumentation import is_weave_instrumented
from agl_weave.tracer import WeaveTracer

from .conftest import new_attempt


@weave.op
def add(a: int, b: int) -> int:
    return a + b


@weave.op
def add_then_double(a: int, b: int) -> int:
    return 2 * add(a, b)


@weave.op
async def slow_square(x: int) -> int:
    await asyncio.sleep(0)
    return x * x


@weave.op
def refuse(reason: str) -> None:
    raise PermissionError(reason)


def _by_name(spans: list[Span]) -> dict[str, Span]:
    return {span.name: span for span in spans}


async def test_nested_ops_become_child_spans_with_ids_inputs_and_outputs(
    tracer: WeaveTracer, store: InMemoryLightningStore
) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context("episode", rollout_id=rollout_id, attempt_id=attempt_id):
        assert add_then_double(2, 3) == 10
    spans = list(await store.query_spans(rollout_id))
    named = _by_name(spans)
    assert set(named) == {"episode", "add_then_double", "add"}
    root, outer, inner = named["episode"], named["add_then_double"], named["add"]
    # one trace; nesting as Weave saw it
    assert {s.trace_id for s in spans} == {root.trace_id}
    assert root.parent_id is None and outer.parent_id == root.span_id and inner.parent_id == outer.span_id
    assert inner.parent is not None and inner.parent.span_id == outer.span_id
    assert inner.context is not None and inner.context.span_id == inner.span_id
    # store-issued sequence ids, the root first
    assert sorted(s.sequence_id for s in spans) == [1, 2, 3] and root.sequence_id == 1
    for span in spans:
        assert (span.rollout_id, span.attempt_id) == (rollout_id, attempt_id)
        assert span.resource.attributes[Resource.TRACER_NAME.value] == "weave"
        assert span.resource.attributes[Resource.ROLLOUT_ID.value] == rollout_id
        assert span.resource.attributes[Resource.SPAN_SEQUENCE_ID.value] == span.sequence_id
        assert span.status.status_code == "OK"
        assert span.start_time is not None and span.end_time is not None and span.start_time <= span.end_time
    assert inner.attributes["agentlightning.operation.input.a"] == 2
    assert inner.attributes["agentlightning.operation.input.b"] == 3
    assert inner.attributes["agentlightning.operation.output"] == 5
    assert outer.attributes["agentlightning.operation.name"].startswith("weave:///")
    assert "/op/add_then_double:" in outer.attributes["agentlightning.operation.name"]
    assert root.attributes["agentlightning.operation.input.agentlightning.rollout_id"] == rollout_id
    assert sorted(s.span_id for s in tracer.get_last_trace()) == sorted(s.span_id for s in spans)


async def test_an_exception_is_recorded_on_its_span_and_on_the_failed_rollout(
    tracer: WeaveTracer, store: InMemoryLightningStore
) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    with pytest.raises(PermissionError, match="not today"):
        async with tracer.trace_context("episode", rollout_id=rollout_id, attempt_id=attempt_id):
            refuse("not today")
    named = _by_name(list(await store.query_spans(rollout_id)))
    failed = named["refuse"]
    assert failed.status.status_code == "ERROR" and failed.status.description == "not today"
    assert failed.attributes["exception.type"] == "PermissionError"
    assert failed.attributes["exception.message"] == "not today"
    assert "raise PermissionError(reason)" in failed.attributes["exception.stacktrace"]
    assert named["episode"].status.status_code == "ERROR"


async def test_async_ops_are_traced(tracer: WeaveTracer, store: InMemoryLightningStore) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        assert await slow_square(7) == 49
    named = _by_name(list(await store.query_spans(rollout_id)))
    assert named["slow_square"].attributes["agentlightning.operation.output"] == 49


async def test_concurrent_rollouts_never_mix(tracer: WeaveTracer, store: InMemoryLightningStore) -> None:
    async def episode(n: int) -> tuple[str, int]:
        rollout_id, attempt_id = await new_attempt(store)
        async with tracer.trace_context(f"episode-{n}", rollout_id=rollout_id, attempt_id=attempt_id):
            for i in range(n):
                add(n, i)
                await asyncio.sleep(0)
        return rollout_id, n

    results = await asyncio.gather(*(episode(n) for n in (1, 2, 3, 4)))
    for rollout_id, n in results:
        spans = list(await store.query_spans(rollout_id))
        assert sorted(s.name for s in spans) == sorted([f"episode-{n}"] + ["add"] * n)
        assert {s.attributes["agentlightning.operation.input.a"] for s in spans if s.name == "add"} == {n}
        assert sorted(s.sequence_id for s in spans) == list(range(1, n + 2))


async def test_calls_outside_a_trace_context_are_not_recorded(
    tracer: WeaveTracer, store: InMemoryLightningStore
) -> None:
    add(1, 1)
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context("episode", rollout_id=rollout_id, attempt_id=attempt_id):
        pass
    add(2, 2)
    weave.get_client().flush()
    assert [s.name for s in await store.query_spans(rollout_id)] == ["episode"]
    assert tracer.server.calls == {}  # the managed server keeps nothing


async def test_without_ids_spans_stay_local(tracer: WeaveTracer, store: InMemoryLightningStore) -> None:
    async with tracer.trace_context("local"):
        add(1, 2)
    spans = tracer.get_last_trace()
    assert sorted(s.name for s in spans) == ["add", "local"]
    assert {(s.rollout_id, s.attempt_id) for s in spans} == {("rollout-dummy", "attempt-dummy")}
    assert sorted(s.sequence_id for s in spans) == [1, 2]
    assert list(await store.query_spans("rollout-dummy")) == []


async def test_operation_context_and_create_span_are_weave_calls(
    tracer: WeaveTracer, store: InMemoryLightningStore
) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context("episode", rollout_id=rollout_id, attempt_id=attempt_id):
        with tracer.operation_context("plan", attributes={"team": "blue"}) as op:
            op.record_attributes(
                {
                    "agentlightning.operation.input.goal": "win",
                    "agentlightning.operation.output": "done",
                    "k": 1,
                }
            )
        with pytest.raises(KeyError), tracer.operation_context("lookup"):
            raise KeyError("missing")
        with tracer.operation_context("judge") as judged:
            judged.record_status("ERROR", "bad answer")
        marker = tracer.create_span("marker", attributes={"step": 3})
    assert (marker.name, marker.attributes["step"], marker.status.status_code) == ("marker", 3, "OK")
    assert op.get_recorded_span().status.status_code == "OK"
    named = _by_name(list(await store.query_spans(rollout_id)))
    plan = named["plan"]
    assert plan.parent_id == named["episode"].span_id
    assert plan.attributes["team"] == "blue" and plan.attributes["k"] == 1
    assert plan.attributes["agentlightning.operation.input.goal"] == "win"
    assert plan.attributes["agentlightning.operation.output"] == "done"
    assert named["lookup"].status.status_code == "ERROR"
    assert named["lookup"].attributes["exception.type"] == "KeyError"
    assert named["judge"].status.status_code == "ERROR" and named["judge"].status.description == "bad answer"
    assert named["marker"].attributes["step"] == 3


async def test_workers_of_one_process_share_weave_and_the_last_restores_it(
    store: InMemoryLightningStore,
) -> None:
    first = WeaveTracer()
    second = copy.deepcopy(first)  # what the trainer gives a second runner worker
    assert second is not first and second.flush_timeout == first.flush_timeout
    first.init_worker(0, store)
    second.init_worker(1, store)
    try:
        assert is_weave_instrumented()
        first.teardown_worker(0)
        assert is_weave_instrumented() and weave.get_client() is not None
        rollout_id, attempt_id = await new_attempt(store)
        async with second.trace_context("episode", rollout_id=rollout_id, attempt_id=attempt_id):
            add(5, 5)
        assert sorted(s.name for s in await store.query_spans(rollout_id)) == ["add", "episode"]
    finally:
        second.teardown_worker(1)
    assert not is_weave_instrumented() and weave.get_client() is None


def test_bad_arguments_fail_clearly(tracer: WeaveTracer) -> None:
    with pytest.raises(ValueError, match="flush_timeout"):
        WeaveTracer(flush_timeout=0)

    async def half_ids() -> Any:
        async with tracer.trace_context(rollout_id="r"):
            pass

    with pytest.raises(ValueError, match="together"):
        asyncio.run(half_ids())


def test_trace_context_before_init_worker_says_what_to_do() -> None:
    async def run() -> None:
        async with WeaveTracer().trace_context():
            pass

    with pytest.raises(RuntimeError, match="init_worker"):
        asyncio.run(run())


def test_a_tracer_pickles_with_its_settings_for_runner_processes() -> None:
    import pickle

    tracer = WeaveTracer(project_name="team/calc", flush_timeout=7.0)
    clone = pickle.loads(pickle.dumps(tracer))
    assert (clone.project_name, clone.flush_timeout, clone.instrument_managed) == ("team/calc", 7.0, True)
    assert clone.get_last_trace() == []
