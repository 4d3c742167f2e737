"""emit_annotation, emit_message and emit_exception (as in Agent Lightning 0.3)."""

from __future__ import annotations

import pytest

from agl_core.emitter import emit_annotation, emit_exception, emit_message, get_message_value
from agl_core.tracer.otel import OtelTracer
from agl_core.types import Span


async def test_annotation_flattens_nested_values(tracer: OtelTracer) -> None:
    async with tracer.trace_context():
        emit_annotation({"meta": {"step": 3, "tags": ["a", "b"], "items": [{"k": 1}]}, "ok": True})
    (span,) = tracer.get_last_trace()
    assert span.name == "agentlightning.annotation" and span.status.status_code == "OK"
    assert span.attributes == {"meta.step": 3, "meta.tags": ["a", "b"], "meta.items.0.k": 1, "ok": True}


@pytest.mark.parametrize(
    ("annotation", "message"),
    [({"x": None}, "'x' has a value of type NoneType"), ({"x": {1: "a"}}, "keys must be strings")],
)
def test_annotation_rejects_unrepresentable_values(annotation: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        emit_annotation(annotation, propagate=False)


def test_annotation_without_tracer() -> None:
    with pytest.raises(RuntimeError, match="No active tracer found"):
        emit_annotation({"a": 1})


async def test_message_span_and_reader(tracer: OtelTracer) -> None:
    async with tracer.trace_context():
        assert emit_message("hello", attributes={"turn": 2}) is None
    (span,) = tracer.get_last_trace()
    assert span.name == "agentlightning.message"
    assert span.attributes == {"agentlightning.message.body": "hello", "turn": 2}
    assert get_message_value(span) == "hello"


def test_message_errors() -> None:
    with pytest.raises(TypeError, match="Message must be a str"):
        emit_message(42, propagate=False)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="Cannot emit message span"):
        emit_message("x")
    assert get_message_value(Span.from_attributes(attributes={})) is None
    with pytest.raises(TypeError, match="must be a str"):
        get_message_value(Span.from_attributes(attributes={"agentlightning.message.body": 3}))


async def test_exception_span_has_otel_attributes_and_ok_status(tracer: OtelTracer) -> None:
    try:
        raise ValueError("bad input")
    except ValueError as exc:
        caught = exc
    async with tracer.trace_context():
        emit_exception(caught, attributes={"where": "parser"})
    (span,) = tracer.get_last_trace()
    assert span.name == "agentlightning.exception" and span.status.status_code == "OK"
    assert span.attributes["exception.type"] == "ValueError"
    assert span.attributes["exception.message"] == "bad input"
    assert span.attributes["exception.escaped"] is True
    assert "raise ValueError" in str(span.attributes["exception.stacktrace"])
    assert span.attributes["where"] == "parser"


def test_exception_never_raised_and_errors() -> None:
    emit_exception(KeyError("k"), propagate=False)  # never raised: no stacktrace, still valid
    with pytest.raises(TypeError, match="exception instance"):
        emit_exception("oops", propagate=False)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="Cannot emit exception span"):
        emit_exception(KeyError("k"))
