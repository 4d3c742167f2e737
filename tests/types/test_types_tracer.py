"""Span model: conversion from real OpenTelemetry spans, synthetic constructors, attribute validation."""

import time
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.resources import Resource as SdkResource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link as OtelLink
from opentelemetry.trace import SpanContext as OtelSpanContext
from opentelemetry.trace import Status, StatusCode, TraceFlags, TraceState
from pydantic import ValidationError

from agl_core.types import (
    Event,
    Link,
    OtelResource,
    Span,
    SpanAttributeNames,
    SpanContext,
    SpanCoreFields,
    SpanNames,
    TraceStatus,
    convert_timestamp,
)

Recorded = tuple[ReadableSpan, ReadableSpan, float, float]


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    """A real SDK pipeline: returns (parent span, rich child span, wall time before, wall time after)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=SdkResource.create({"service.name": "agl-test", "deployment": "ci"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agl.tests")
    linked = OtelSpanContext(
        trace_id=0xABC, span_id=0xDEF, is_remote=True, trace_state=TraceState([("vendor", "v1")])
    )

    before = time.time()
    with (
        tracer.start_as_current_span("agent.run"),
        tracer.start_as_current_span(
            "openai.chat.completion",
            attributes={
                "gen_ai.request.model": "gpt-test",
                "llm.usage.total_tokens": 42,
                "temperature": 0.25,
                "stream": False,
                "prompt_token_ids": (1, 2, 3),
                "tags": ["a", "b"],
            },
            links=[OtelLink(linked, attributes={"reason": "retry"})],
        ) as child,
    ):
        child.add_event("token", {"index": 7, "text": "hi"})
        child.set_status(Status(StatusCode.ERROR, "boom"))
    after = time.time()

    finished = {span.name: span for span in exporter.get_finished_spans()}
    yield finished["agent.run"], finished["openai.chat.completion"], before, after
    provider.shutdown()


def test_from_opentelemetry_ids_and_parent(recorded: Recorded) -> None:
    otel_parent, otel_child, _, _ = recorded
    parent = Span.from_opentelemetry(otel_parent, "ro-1", "at-1", 1)
    child = Span.from_opentelemetry(otel_child, "ro-1", "at-1", 2)

    context = otel_child.get_span_context()
    assert context is not None
    assert child.trace_id == f"{context.trace_id:032x}"
    assert child.span_id == f"{context.span_id:016x}"
    assert len(child.trace_id) == 32 and len(child.span_id) == 16
    assert child.parent_id == parent.span_id
    assert child.trace_id == parent.trace_id
    assert parent.parent_id is None and parent.parent is None
    assert child.parent == SpanContext(
        trace_id=parent.trace_id, span_id=parent.span_id, is_remote=False, trace_state={}
    )
    assert child.context == SpanContext(
        trace_id=child.trace_id, span_id=child.span_id, is_remote=False, trace_state={}
    )
    assert (child.rollout_id, child.attempt_id, child.sequence_id) == ("ro-1", "at-1", 2)
    assert child.name == "openai.chat.completion"


def test_from_opentelemetry_content(recorded: Recorded) -> None:
    _, otel_child, before, after = recorded
    span = Span.from_opentelemetry(otel_child, "ro-1", "at-1", 2)

    assert span.attributes == {
        "gen_ai.request.model": "gpt-test",
        "llm.usage.total_tokens": 42,
        "temperature": 0.25,
        "stream": False,
        "prompt_token_ids": [1, 2, 3],  # OpenTelemetry's tuples become lists
        "tags": ["a", "b"],
    }
    assert span.status == TraceStatus(status_code="ERROR", description="boom")

    assert span.start_time is not None and span.end_time is not None
    assert before <= span.start_time <= span.end_time <= after
    assert otel_child.start_time is not None
    assert span.start_time == pytest.approx(otel_child.start_time / 1e9)

    assert len(span.events) == 1
    event = span.events[0]
    assert event.name == "token"
    assert event.attributes == {"index": 7, "text": "hi"}
    assert event.timestamp is not None and before <= event.timestamp <= after

    assert span.links == [
        Link(
            context=SpanContext(
                trace_id=f"{0xABC:032x}",
                span_id=f"{0xDEF:016x}",
                is_remote=True,
                trace_state={"vendor": "v1"},
            ),
            attributes={"reason": "retry"},
        )
    ]
    assert span.resource.attributes["service.name"] == "agl-test"
    assert span.resource.attributes["deployment"] == "ci"
    assert span.resource.schema_url == ""
    # SDK internals are not copied as extra fields
    assert span.model_extra == {}


def test_from_opentelemetry_round_trips_through_json(
    recorded: Recorded,
) -> None:
    for otel_span in recorded[:2]:
        span = Span.from_opentelemetry(otel_span, "ro-1", "at-1", 5)
        assert Span.model_validate_json(span.model_dump_json()) == span


def test_from_opentelemetry_copies_only_cheap_extra_fields() -> None:
    class TaggedSpan(ReadableSpan):
        def __init__(self, **kwargs: object) -> None:
            super().__init__(**kwargs)  # type: ignore[arg-type]
            self.agent_name = "solver"
            self._retries = 2
            self.score = None
            self.payload = object()  # not a JSON primitive: dropped, not stringified
            self.rollout_id = "spoofed"  # a Span field: never overrides the argument

    context = OtelSpanContext(trace_id=1, span_id=2, is_remote=False, trace_flags=TraceFlags(1))
    src = TaggedSpan(name="custom", context=context, start_time=1_700_000_000_000_000_000, end_time=None)
    span = Span.from_opentelemetry(src, "ro-1", "at-1", 1)
    assert span.model_extra == {"agent_name": "solver", "retries": 2, "score": None}
    assert span.rollout_id == "ro-1"
    assert span.trace_id == "0" * 31 + "1"
    assert span.span_id == "0" * 15 + "2"
    assert span.start_time == pytest.approx(1_700_000_000.0)
    assert span.end_time is None
    assert span.status.status_code == "UNSET"
    assert span.events == [] and span.links == []
    # the class-level cache must not hide extras of a second instance
    assert Span.from_opentelemetry(src, "ro-1", "at-1", 2).model_extra == span.model_extra
    assert Span.model_validate_json(span.model_dump_json()) == span


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (0, 0.0),
        (1_700_000_000.5, 1_700_000_000.5),
        (1_700_000_000_500_000_000, 1_700_000_000.5),
        (1e12, 1e12),  # the threshold itself is still seconds
    ],
)
def test_convert_timestamp(value: float | None, expected: float | None) -> None:
    result = convert_timestamp(value)
    assert result == (pytest.approx(expected) if expected is not None else None)
    assert result is None or isinstance(result, float)


def test_from_attributes_defaults() -> None:
    span = Span.from_attributes(attributes={"agentlightning.reward.0.value": 1.0})
    assert (span.rollout_id, span.attempt_id, span.sequence_id) == ("", "", 0)
    assert span.name == "agentlightning.virtual" == SpanNames.VIRTUAL.value
    assert span.status == TraceStatus(status_code="OK")
    assert len(span.trace_id) == 32 and int(span.trace_id, 16) != 0
    assert len(span.span_id) == 16 and int(span.span_id, 16) != 0
    assert span.parent_id is None and span.parent is None
    assert span.context == SpanContext(
        trace_id=span.trace_id, span_id=span.span_id, is_remote=False, trace_state={}
    )
    assert span.resource == OtelResource(attributes={}, schema_url="")
    assert span.events == [] and span.links == []
    assert span.start_time is None and span.end_time is None
    assert span.attributes == {"agentlightning.reward.0.value": 1.0}

    other = Span.from_attributes(attributes={})
    assert (other.trace_id, other.span_id) != (span.trace_id, span.span_id)


def test_from_attributes_keeps_given_values() -> None:
    resource = OtelResource(attributes={"service.name": "x"}, schema_url="https://schema")
    span = Span.from_attributes(
        attributes={"k": ("a", "b")},
        rollout_id="ro-1",
        attempt_id="at-1",
        sequence_id=9,
        name="agentlightning.reward",
        trace_id="1" * 32,
        span_id="2" * 16,
        parent_id="3" * 16,
        start_time=10.0,
        end_time=11.0,
        resource=resource,
        status=TraceStatus(status_code="ERROR", description="bad"),
    )
    assert (span.rollout_id, span.attempt_id, span.sequence_id, span.name) == (
        "ro-1",
        "at-1",
        9,
        "agentlightning.reward",
    )
    assert (span.trace_id, span.span_id, span.parent_id) == ("1" * 32, "2" * 16, "3" * 16)
    assert span.parent == SpanContext(trace_id="1" * 32, span_id="3" * 16, is_remote=False, trace_state={})
    assert (span.start_time, span.end_time) == (10.0, 11.0)
    assert span.resource == resource
    assert span.status.description == "bad"
    assert span.attributes == {"k": ["a", "b"]}
    assert Span.model_validate_json(span.model_dump_json()) == span


def test_from_core_fields() -> None:
    core = SpanCoreFields(name="agentlightning.annotation", attributes={"x": 1})
    assert core.status == TraceStatus(status_code="UNSET")
    assert core.start_time is None and core.end_time is None

    before = time.time()
    span = Span.from_core_fields(core, rollout_id="ro-1", attempt_id="at-1", sequence_id=3)
    after = time.time()
    assert span.start_time is not None and before <= span.start_time <= after
    assert span.end_time is None
    assert (span.name, span.attributes, span.status) == ("agentlightning.annotation", {"x": 1}, core.status)
    assert (span.rollout_id, span.attempt_id, span.sequence_id) == ("ro-1", "at-1", 3)

    timed = SpanCoreFields(
        name="n", attributes={}, start_time=5.0, end_time=6.0, status=TraceStatus(status_code="OK")
    )
    span = Span.from_core_fields(timed)
    assert (span.start_time, span.end_time, span.status.status_code) == (5.0, 6.0, "OK")
    assert (span.rollout_id, span.attempt_id, span.sequence_id) == ("", "", 0)
    assert SpanCoreFields.model_validate_json(timed.model_dump_json()) == timed


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("s", "s"),
        (True, True),
        (3, 3),
        (2.5, 2.5),
        ((1, 0), [1, 0]),  # ints stay ints, never coerced to bools
        ((True, False), [True, False]),
        ([1, 2.5], [1.0, 2.5]),
        ((), []),
        (["x"], ["x"]),
    ],
)
def test_attribute_values_are_normalized(value: object, expected: object) -> None:
    event = Event(name="e", attributes={"k": value})  # type: ignore[dict-item]
    assert event.attributes["k"] == expected
    assert type(event.attributes["k"]) is type(expected)
    assert Event.model_validate_json(event.model_dump_json()) == event


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ({"nested": 1}, "value of type dict"),
        (None, "value of type NoneType"),
        (["a", 1], r"sequence of \['int', 'str'\]"),
        ([True, 1], r"sequence of \['bool', 'int'\]"),
        ([[1], [2]], r"sequence of \['list'\]"),
    ],
)
def test_invalid_attribute_values_are_rejected(value: object, fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment) as info:
        Span.from_attributes(attributes={"bad.key": value})
    assert "'bad.key'" in str(info.value)


def test_stored_span_context_keeps_attribute_values_as_they_are() -> None:
    from agl_core.types.tracer import STORED_SPAN_CONTEXT

    span = Span.from_attributes(attributes={"k": [1, 2.5]}, rollout_id="r", attempt_id="a")
    raw = span.model_dump_json()
    assert Span.model_validate_json(raw, context=STORED_SPAN_CONTEXT) == span  # a store's own JSON
    mixed = raw.replace("[1.0,2.5]", '["a",1]')
    assert mixed != raw
    with pytest.raises(ValidationError, match="sequence of"):
        Span.model_validate_json(mixed)  # anything else is still checked
    assert Span.model_validate_json(mixed, context=STORED_SPAN_CONTEXT).attributes["k"] == ["a", 1]
    with pytest.raises(ValidationError):  # only that very object turns the check off
        Span.model_validate_json(mixed, context={"agl_stored_span": True})


def test_non_string_attribute_keys_are_rejected() -> None:
    with pytest.raises(ValidationError):
        Event(name="e", attributes={1: "x"})  # type: ignore[dict-item]


def test_all_span_models_allow_extra_fields() -> None:
    for model in (
        SpanContext(trace_id="t", span_id="s", is_remote=False, trace_state={}, extra_flag=1),  # type: ignore[call-arg]
        TraceStatus(status_code="OK", extra_flag=1),  # type: ignore[call-arg]
        Event(name="e", attributes={}, extra_flag=1),  # type: ignore[call-arg]
        OtelResource(attributes={}, schema_url="", extra_flag=1),  # type: ignore[call-arg]
        Link(context=SpanContext(trace_id="t", span_id="s", is_remote=False, trace_state={}), extra_flag=1),  # type: ignore[call-arg]
    ):
        assert model.model_extra == {"extra_flag": 1}
        assert type(model).model_validate_json(model.model_dump_json()) == model
    span = Span.model_validate({**Span.from_attributes(attributes={}).model_dump(), "custom": {"a": [1]}})
    assert span.model_extra == {"custom": {"a": [1]}}
    assert Span.model_validate_json(span.model_dump_json()) == span


def test_span_requires_its_core_fields() -> None:
    with pytest.raises(ValidationError) as info:
        Span.model_validate({"rollout_id": "r"})
    missing = {error["loc"][0] for error in info.value.errors() if error["type"] == "missing"}
    assert {"attempt_id", "sequence_id", "trace_id", "span_id", "name", "status", "resource"} <= missing
    with pytest.raises(ValidationError):
        TraceStatus(status_code="WARN")  # type: ignore[arg-type]


def test_deprecated_name_enums_keep_their_strings() -> None:
    assert {member.name: member.value for member in SpanNames} == {
        "REWARD": "agentlightning.reward",
        "MESSAGE": "agentlightning.message",
        "OBJECT": "agentlightning.object",
        "EXCEPTION": "agentlightning.exception",
        "VIRTUAL": "agentlightning.virtual",
        "ROLLOUT_ID": "agentlightning.rollout_id",
        "ATTEMPT_ID": "agentlightning.attempt_id",
        "SPAN_SEQUENCE_ID": "agentlightning.span_sequence_id",
    }
    assert SpanNames.REWARD == "agentlightning.reward"  # str enum compares equal to its value
    assert {member.name: member.value for member in SpanAttributeNames} == {
        "MESSAGE": "message",
        "OBJECT": "object",
    }
