"""emit_object / get_object_value round trips and errors (as in Agent Lightning 0.3)."""

from __future__ import annotations

import pytest

from agl_core.emitter import emit_object, get_object_value
from agl_core.tracer.otel import OtelTracer
from agl_core.types import Span


@pytest.mark.parametrize(
    ("value", "kind", "key"),
    [
        ("text", "str", "agentlightning.object.literal"),
        (7, "int", "agentlightning.object.literal"),
        (1.5, "float", "agentlightning.object.literal"),
        (False, "bool", "agentlightning.object.literal"),
        (b"\x00\xffbin", "bytes", "agentlightning.object.literal"),
        ({"a": [1, 2]}, "dict", "agentlightning.object.json"),
        ([1, "x"], "list", "agentlightning.object.json"),
        (None, "NoneType", "agentlightning.object.json"),
    ],
)
def test_round_trip(value: object, kind: str, key: str) -> None:
    fields = emit_object(value, propagate=False)
    assert fields.name == "agentlightning.object" and fields.status.status_code == "OK"
    assert fields.attributes["agentlightning.object.type"] == kind
    assert key in fields.attributes
    assert get_object_value(Span.from_core_fields(fields)) == value


async def test_emitted_through_tracer_with_attributes(tracer: OtelTracer) -> None:
    async with tracer.trace_context():
        emit_object({"answer": 42}, attributes={"source": "tool"})
    (span,) = tracer.get_last_trace()
    assert span.attributes["source"] == "tool"
    assert get_object_value(span) == {"answer": 42}


def test_non_serializable_is_runtime_error() -> None:
    with pytest.raises(RuntimeError, match="Object must be JSON serializable"):
        emit_object(object(), propagate=False)


def test_reader_errors() -> None:
    with pytest.raises(RuntimeError, match="not valid JSON"):
        get_object_value(Span.from_attributes(attributes={"agentlightning.object.json": "{oops"}))
    with pytest.raises(RuntimeError, match=r"Unknown agentlightning\.object\.type"):
        get_object_value(
            Span.from_attributes(
                attributes={"agentlightning.object.literal": "1", "agentlightning.object.type": "complex"}
            )
        )
    assert get_object_value(Span.from_attributes(attributes={})) is None
    with pytest.raises(RuntimeError, match="No active tracer"):
        emit_object(1)
