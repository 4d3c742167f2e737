"""The operation decorator (sync and async) and context manager (as in Agent Lightning 0.3)."""

from __future__ import annotations

import pytest

from agl_core.emitter import operation
from agl_core.tracer.otel import OtelTracer


@operation
def add(a: int, b: int = 10, *rest: int, **options: str) -> dict[str, int]:
    return {"sum": a + b + sum(rest)}


@operation(name="fetch", category="io")
async def fetch_data(url: str) -> list[str]:
    return [url, url.upper()]


async def test_sync_decorator_records_name_inputs_and_output(tracer: OtelTracer) -> None:
    async with tracer.trace_context():
        assert add(1, 2, 3, 4, mode="fast") == {"sum": 10}
    (span,) = tracer.get_last_trace()
    assert span.name == "agentlightning.operation"
    assert span.attributes == {
        "agentlightning.operation.name": "add",
        "agentlightning.operation.input.a": 1,
        "agentlightning.operation.input.b": 2,
        "agentlightning.operation.input.rest.0": 3,
        "agentlightning.operation.input.rest.1": 4,
        "agentlightning.operation.input.options.mode": "fast",
        "agentlightning.operation.output.sum": 10,
    }


async def test_async_decorator_with_name_and_attributes(tracer: OtelTracer) -> None:
    async with tracer.trace_context():
        assert await fetch_data("x") == ["x", "X"]
    (span,) = tracer.get_last_trace()
    assert span.attributes["agentlightning.operation.name"] == "fetch"
    assert span.attributes["category"] == "io"
    assert span.attributes["agentlightning.operation.input.url"] == "x"
    assert span.attributes["agentlightning.operation.output"] == ["x", "X"]


async def test_decorator_records_exceptions_and_reraises(tracer: OtelTracer) -> None:
    @operation
    async def broken() -> None:
        raise ValueError("nope")

    async with tracer.trace_context():
        with pytest.raises(ValueError, match="nope"):
            await broken()
    (span,) = tracer.get_last_trace()
    assert span.status.status_code == "ERROR" and span.status.description == "nope"
    assert span.attributes["exception.type"] == "ValueError"


async def test_unbindable_call_falls_back_to_raw_args(tracer: OtelTracer) -> None:
    @operation
    def one(x: int) -> int:
        return x

    async with tracer.trace_context():
        with pytest.raises(TypeError):
            one(1, 2, y=3)  # type: ignore[call-arg]
    (span,) = tracer.get_last_trace()
    assert span.attributes["agentlightning.operation.input.args.0"] == 1
    assert span.attributes["agentlightning.operation.input.args.1"] == 2
    assert span.attributes["agentlightning.operation.input.kwargs.y"] == 3


async def test_context_manager_set_input_output_and_span(tracer: OtelTracer) -> None:
    async with tracer.trace_context():
        with operation(name="search", user=7) as op:
            op.set_input("query", 3, top_k=5, filters={"lang": "en"})
            with pytest.raises(RuntimeError, match="Span is not ready yet"):
                op.span()
            op.set_output({"hits": 2})
    core = op.span()
    (span,) = tracer.get_last_trace()
    assert core.attributes == span.attributes
    assert span.attributes == {
        "agentlightning.operation.name": "search",
        "user": 7,
        "agentlightning.operation.input.args.0": "query",
        "agentlightning.operation.input.args.1": 3,
        "agentlightning.operation.input.top_k": 5,
        "agentlightning.operation.input.filters.lang": "en",
        "agentlightning.operation.output.hits": 2,
    }


def test_argument_errors_and_missing_tracer() -> None:
    with pytest.raises(ValueError, match="name"):
        operation(name="a", **{"agentlightning.operation.name": "b"})
    with pytest.raises(ValueError, match="span names cannot be"):
        operation("custom-span-name")
    with pytest.raises(RuntimeError, match="Cannot emit operation span"), operation():
        pass
    with pytest.raises(RuntimeError, match="No active tracer"):
        add(1)
    op = operation()
    with pytest.raises(RuntimeError, match="outside"):
        op.set_input(1)


def test_propagate_false_uses_a_dummy_tracer() -> None:
    @operation(propagate=False)
    def local(x: int) -> int:
        return x + 1

    assert local(1) == 2
    with operation(propagate=False, name="local-op") as op:
        op.set_output("ok")
    assert op.span().attributes["agentlightning.operation.output"] == "ok"
    assert op.span().end_time is not None
