"""emit_reward and the reward readers (as in Agent Lightning 0.3)."""

from __future__ import annotations

import json

import pytest

from agl_core.emitter import (
    emit_annotation,
    emit_message,
    emit_reward,
    find_final_reward,
    find_reward_spans,
    get_reward_value,
    get_rewards_from_span,
    is_reward_span,
    reward,
)
from agl_core.semconv import RewardPydanticModel
from agl_core.tracer.otel import OtelTracer
from agl_core.types import Span
from agl_core.utils.otel import make_link_attributes


def span(name: str, **attributes: object) -> Span:
    return Span.from_attributes(name=name, attributes=attributes)


async def test_scalar_reward_is_flattened_primary_dimension(tracer: OtelTracer) -> None:
    async with tracer.trace_context():
        fields = emit_reward(0.75)
    (stored,) = tracer.get_last_trace()
    expected = {"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": 0.75}
    assert fields.attributes == expected and stored.attributes == expected
    assert stored.name == "agentlightning.annotation" and stored.status.status_code == "OK"
    assert get_reward_value(stored) == 0.75


@pytest.mark.parametrize(("value", "expected"), [(1, 1.0), (True, 1.0), (False, 0.0), (-2.5, -2.5)])
def test_int_and_bool_become_float(value: float, expected: float) -> None:
    fields = emit_reward(value, propagate=False)
    assert fields.attributes["agentlightning.reward.0.value"] == expected
    assert isinstance(fields.attributes["agentlightning.reward.0.value"], float)


@pytest.mark.parametrize("bad", ["1.0", None, [1.0], object()])
def test_non_numeric_scalar_is_type_error(bad: object) -> None:
    with pytest.raises(TypeError, match="Reward must be a number"):
        emit_reward(bad, propagate=False)  # type: ignore[arg-type]


def test_multi_dimensional_primary_first_then_dict_order() -> None:
    fields = emit_reward({"speed": 0.2, "correct": 1, "style": 0.5}, primary_key="correct", propagate=False)
    as_span = Span.from_core_fields(fields)
    assert get_rewards_from_span(as_span) == [
        RewardPydanticModel(name="correct", value=1.0),
        RewardPydanticModel(name="speed", value=0.2),
        RewardPydanticModel(name="style", value=0.5),
    ]
    assert get_reward_value(as_span) == 1.0


def test_multi_dimensional_errors() -> None:
    with pytest.raises(ValueError, match="primary_key"):
        emit_reward({"a": 1.0}, propagate=False)
    with pytest.raises(ValueError, match="'b' is not one of"):
        emit_reward({"a": 1.0}, primary_key="b", propagate=False)
    with pytest.raises(ValueError, match="'a' must be a number"):
        emit_reward({"a": "high"}, primary_key="a", propagate=False)  # type: ignore[dict-item]


def test_extra_attributes_are_added_and_links_work() -> None:
    attributes = {**make_link_attributes({"gen_ai.response.id": "resp-1"}), "note": {"k": "v"}}
    fields = emit_reward(1.0, attributes=attributes, propagate=False)
    assert fields.attributes["agentlightning.link.0.key_match"] == "gen_ai.response.id"
    assert fields.attributes["note.k"] == "v"
    assert fields.attributes["agentlightning.reward.0.value"] == 1.0


def test_no_active_tracer_is_runtime_error() -> None:
    with pytest.raises(RuntimeError, match=r"No active tracer found\. Cannot emit annotation span"):
        emit_reward(1.0)


def test_readers_accept_legacy_forms() -> None:
    assert get_reward_value(span("agentlightning.annotation", reward=0.3)) == 0.3
    assert get_reward_value(span("agentlightning.reward", reward=2)) == 2.0
    agentops = span("task", **{"agentops.task.output": json.dumps({"type": "reward", "value": 0.9})})
    with pytest.warns(DeprecationWarning):
        assert get_reward_value(agentops) == 0.9
    not_reward = span("task", **{"agentops.entity.output": json.dumps({"type": "answer", "value": 1})})
    assert get_reward_value(not_reward) is None
    assert get_reward_value(span("agentlightning.message", reward=1.0)) is None
    assert get_rewards_from_span(span("x", other=1)) == []


def test_find_reward_spans_and_final_reward() -> None:
    spans = [
        Span.from_core_fields(emit_reward(0.1, propagate=False)),
        Span.from_core_fields(emit_annotation({"tag": "x"}, propagate=False)),
        Span.from_core_fields(emit_reward(0.9, propagate=False)),
        span("agentlightning.message", **{"agentlightning.message.body": "done"}),
    ]
    assert find_reward_spans(spans) == [spans[0], spans[2]]
    assert [is_reward_span(s) for s in spans] == [True, False, True, False]
    assert find_final_reward(spans) == 0.9
    assert find_final_reward(spans[1:2]) is None


async def test_readers_accept_otel_spans_directly(tracer: OtelTracer) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.get_tracer("t").start_span(
        "agentlightning.annotation",
        attributes={"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": 0.4},
    ).end()
    (readable,) = exporter.get_finished_spans()
    assert get_reward_value(readable) == 0.4


async def test_deprecated_reward_decorator_emits(tracer: OtelTracer) -> None:
    with pytest.warns(DeprecationWarning):

        @reward
        def score(x: float) -> float:
            return x * 2

    with pytest.warns(DeprecationWarning):

        @reward
        async def ascore(x: float) -> float:
            return x + 1

    async with tracer.trace_context():
        assert score(0.25) == 0.5
        assert await ascore(1.0) == 2.0
        emit_message("after")
    assert [get_reward_value(s) for s in tracer.get_last_trace()] == [0.5, 2.0, None]
