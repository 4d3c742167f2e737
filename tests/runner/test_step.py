"""LitAgentRunner.step on a real in-memory store with the real OpenTelemetry tracer: results and errors."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agl_core.emitter import emit_annotation, emit_message, emit_reward, find_final_reward, operation
from agl_core.litagent import LitAgent, MissingResourceError, rollout
from agl_core.semconv import AGL_EXCEPTION
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer import DummyTracer
from agl_core.types import LLM, AttemptedRollout, NamedResources, ProxyLLM, Rollout, Span

from ._helpers import reward_values, running

LLM_RESOURCES: NamedResources = {"llm": LLM(endpoint="http://model/v1", model="m")}


async def spans_of(store: InMemoryLightningStore, rollout_id: str) -> list[Span]:
    return list(await store.query_spans(rollout_id))


async def test_none_result_keeps_the_traced_spans(store: InMemoryLightningStore) -> None:
    @rollout
    async def agent(task: str) -> None:
        with operation(name="plan"):
            emit_message(f"thinking about {task}")
        emit_reward(0.25)

    with running(agent, store) as runner:
        result = await runner.step("t", resources=LLM_RESOURCES)
    assert result.status == "succeeded"
    spans = await spans_of(store, result.rollout_id)
    names = [s.name for s in spans]
    assert "agentlightning.message" in names
    assert "agentlightning.operation" in names
    assert reward_values(spans) == [0.25]
    assert [s.sequence_id for s in spans] == sorted(s.sequence_id for s in spans)


async def test_float_result_becomes_one_reward_span(store: InMemoryLightningStore) -> None:
    @rollout
    def agent(task: str) -> float:
        return 0.75

    with running(agent, store) as runner:
        result = await runner.step("t", resources=LLM_RESOURCES)
    assert isinstance(result, AttemptedRollout)
    assert result.attempt.status == "succeeded"
    assert reward_values(await spans_of(store, result.rollout_id)) == [0.75]


async def test_float_result_equal_to_an_emitted_reward_adds_no_duplicate(
    store: InMemoryLightningStore,
) -> None:
    @rollout
    def agent(task: str) -> float:
        emit_reward(0.5)
        return 0.5

    with running(agent, store) as runner:
        result = await runner.step("t", resources=LLM_RESOURCES)
    assert reward_values(await spans_of(store, result.rollout_id)) == [0.5]


async def test_float_result_after_other_rewards_is_recorded_last(store: InMemoryLightningStore) -> None:
    @rollout
    async def agent(task: str) -> float:
        emit_reward(0.1)
        return 0.9

    with running(agent, store) as runner:
        result = await runner.step("t", resources=LLM_RESOURCES)
    spans = await spans_of(store, result.rollout_id)
    assert reward_values(spans) == [0.1, 0.9]
    assert find_final_reward(spans) == 0.9


@pytest.mark.parametrize(("value", "expected"), [(3, 3.0), (True, 1.0)])
async def test_int_and_bool_results_are_converted_with_a_warning(
    store: InMemoryLightningStore, caplog: pytest.LogCaptureFixture, value: Any, expected: float
) -> None:
    @rollout
    def agent(task: str) -> Any:
        return value

    with running(agent, store) as runner, caplog.at_level(logging.WARNING):
        result = await runner.step("t", resources=LLM_RESOURCES)
    assert reward_values(await spans_of(store, result.rollout_id)) == [expected]
    assert f"returned a {type(value).__name__} reward" in caplog.text


async def test_span_core_fields_result_is_stored_with_fresh_sequence_ids(
    store: InMemoryLightningStore,
) -> None:
    @rollout
    def agent(task: str) -> list[Any]:
        return [emit_annotation({"step": 1}, propagate=False), emit_reward(1.5, propagate=False)]

    with running(agent, store) as runner:
        result = await runner.step("t", resources=LLM_RESOURCES)
    spans = await spans_of(store, result.rollout_id)
    assert [s.name for s in spans] == ["agentlightning.annotation", "agentlightning.annotation"]
    assert spans[0].attributes["step"] == 1
    assert reward_values(spans) == [1.5]
    assert spans[0].sequence_id < spans[1].sequence_id


async def test_span_result_without_ids_is_attributed_to_the_attempt(store: InMemoryLightningStore) -> None:
    @rollout
    def agent(task: str) -> list[Span]:
        return [Span.from_attributes(attributes={"custom": "yes"}, name="my.span", sequence_id=1)]

    with running(agent, store) as runner:
        result = await runner.step("t", resources=LLM_RESOURCES)
    assert isinstance(result, AttemptedRollout)
    (span,) = await spans_of(store, result.rollout_id)
    assert (span.name, span.attributes, span.attempt_id) == (
        "my.span",
        {"custom": "yes"},
        result.attempt.attempt_id,
    )


async def test_readable_span_result_is_converted_and_stored(store: InMemoryLightningStore) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sdk_tracer = provider.get_tracer("test")

    @rollout
    def agent(task: str) -> list[ReadableSpan]:
        with (
            sdk_tracer.start_as_current_span("outer", attributes={"k": "v"}),
            sdk_tracer.start_as_current_span("inner"),
        ):
            pass
        return list(exporter.get_finished_spans())

    with running(agent, store) as runner:
        result = await runner.step("t", resources=LLM_RESOURCES)
    spans = await spans_of(store, result.rollout_id)
    assert sorted(s.name for s in spans) == ["inner", "outer"]
    outer = next(s for s in spans if s.name == "outer")
    inner = next(s for s in spans if s.name == "inner")
    assert inner.parent_id == outer.span_id
    assert outer.attributes == {"k": "v"}


async def test_empty_list_result_succeeds_with_a_warning(
    store: InMemoryLightningStore, caplog: pytest.LogCaptureFixture
) -> None:
    @rollout
    def agent(task: str) -> list[Any]:
        return []

    with running(agent, store) as runner, caplog.at_level(logging.WARNING):
        result = await runner.step("t", resources=LLM_RESOURCES)
    assert result.status == "succeeded"
    assert "empty list of spans" in caplog.text


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ("not a reward", TypeError, "returned str"),
        ([emit_reward(1.0, propagate=False), "x"], ValueError, "a list of SpanCoreFields, str"),
    ],
)
async def test_unsupported_results_fail_the_attempt(
    store: InMemoryLightningStore, value: Any, error: type[Exception], message: str
) -> None:
    @rollout
    def agent(task: str) -> Any:
        return value

    with running(agent, store) as runner, pytest.raises(error, match=message):
        await runner.step("t", resources=LLM_RESOURCES)
    (failed,) = await store.query_rollouts()
    assert failed.status == "failed"
    spans = await spans_of(store, failed.rollout_id)
    assert [s.name for s in spans] == [AGL_EXCEPTION]
    assert spans[0].attributes["exception.type"] == error.__name__


async def test_agent_exception_fails_the_attempt_and_is_recorded(store: InMemoryLightningStore) -> None:
    @rollout
    async def agent(task: str) -> float:
        emit_message("about to fail")
        raise KeyError("missing-key")

    with running(agent, store) as runner, pytest.raises(KeyError, match="missing-key"):
        await runner.step("t", resources=LLM_RESOURCES)
    (failed,) = await store.query_rollouts()
    assert isinstance(failed, AttemptedRollout)
    assert (failed.status, failed.attempt.status) == ("failed", "failed")
    spans = await spans_of(store, failed.rollout_id)
    assert [s.name for s in spans] == ["agentlightning.message", AGL_EXCEPTION]
    assert spans[1].attributes["exception.type"] == "KeyError"
    assert "missing-key" in str(spans[1].attributes["exception.message"])


async def test_agent_needing_an_llm_fails_clearly_when_no_resources_exist(
    store: InMemoryLightningStore,
) -> None:
    @rollout
    def agent(task: str, llm: LLM) -> float:
        return 1.0

    with running(agent, store) as runner, pytest.raises(MissingResourceError, match="No LLM resource found"):
        await runner.step("t")
    (failed,) = await store.query_rollouts()
    assert failed.status == "failed"
    (span,) = await spans_of(store, failed.rollout_id)
    assert span.attributes["exception.type"] == "MissingResourceError"
    assert "store.add_resources" in str(span.attributes["exception.message"])


async def test_agent_needing_nothing_runs_without_resources(
    store: InMemoryLightningStore, caplog: pytest.LogCaptureFixture
) -> None:
    @rollout
    def agent(task: str, resources: NamedResources) -> float:
        assert resources == {}
        return 1.0

    with running(agent, store) as runner, caplog.at_level(logging.WARNING):
        first = await runner.step("a")
        second = await runner.step("b")
    assert (first.status, second.status) == ("succeeded", "succeeded")
    assert caplog.text.count("the store has no resources") == 1


async def test_step_resources_are_stored_and_a_proxy_llm_is_routed_to_the_attempt(
    store: InMemoryLightningStore,
) -> None:
    seen: list[tuple[str, str]] = []

    @rollout
    def agent(task: str, llm: LLM, rollout: AttemptedRollout) -> float:
        seen.append((llm.endpoint, f"/rollout/{rollout.rollout_id}/attempt/{rollout.attempt.attempt_id}/v1"))
        return 1.0

    resources: NamedResources = {"llm": ProxyLLM(endpoint="http://proxy:1/v1", model="m")}
    with running(agent, store) as runner:
        result = await runner.step("t", resources=resources)
    latest = await store.get_latest_resources()
    assert latest is not None
    assert result.resources_id == latest.resources_id
    (endpoint, expected_suffix), *_ = seen
    assert endpoint == "http://proxy:1" + expected_suffix


class ModeAgent(LitAgent[str]):
    def training_rollout(self, task: str, resources: NamedResources, rollout: Rollout) -> float:
        return 1.0

    def validation_rollout(self, task: str, resources: NamedResources, rollout: Rollout) -> float:
        return 0.0


@pytest.mark.parametrize(("mode", "reward"), [("train", 1.0), ("val", 0.0), ("test", 0.0), (None, 0.0)])
async def test_mode_selects_training_or_validation_rollout(
    store: InMemoryLightningStore, mode: Any, reward: float
) -> None:
    with running(ModeAgent(), store) as runner:
        result = await runner.step("t", resources=LLM_RESOURCES, mode=mode)
    assert result.mode == mode
    assert reward_values(await spans_of(store, result.rollout_id)) == [reward]


async def test_tracer_without_trace_context_runs_untraced(
    store: InMemoryLightningStore, caplog: pytest.LogCaptureFixture
) -> None:
    @rollout
    def agent(task: str) -> float:
        return 0.5

    with running(agent, store, tracer=DummyTracer()) as runner, caplog.at_level(logging.WARNING):
        first = await runner.step("a", resources=LLM_RESOURCES)
        second = await runner.step("b", resources=LLM_RESOURCES)
    assert (first.status, second.status) == ("succeeded", "succeeded")
    assert reward_values(await spans_of(store, second.rollout_id)) == [0.5]
    assert caplog.text.count("has no trace_context()") == 1


async def test_worker_id_is_recorded_on_the_attempt(store: InMemoryLightningStore) -> None:
    @rollout
    def agent(task: str) -> float:
        return 1.0

    with running(agent, store, worker_id=7) as runner:
        assert runner.get_worker_id() == "Worker-7"
        result = await runner.step("t", resources=LLM_RESOURCES)
    assert isinstance(result, AttemptedRollout)
    assert result.attempt.worker_id == "Worker-7"
    worker = await store.get_worker_by_id("Worker-7")
    assert worker is not None and worker.status == "idle"
