"""GenAI message content written as OpenTelemetry log records (Google ADK, Semantic Kernel) is captured."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from opentelemetry import _logs as logs_api
from opentelemetry import trace as trace_api
from opentelemetry._logs import LogRecord
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.util._once import Once

from agl_core.adapter import TracerTraceToTriplet, TraceToMessages
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer import bridge, logs
from agl_core.tracer.otel import OtelTracer
from tests.tracer._helpers import new_attempt


@pytest.fixture
def fresh_globals(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A process whose global tracer and logger providers were never set (each can be set once)."""
    monkeypatch.setattr(trace_api, "_TRACER_PROVIDER", None)
    monkeypatch.setattr(trace_api, "_TRACER_PROVIDER_SET_ONCE", Once())
    from opentelemetry._logs import _internal as logs_internal

    monkeypatch.setattr(logs_internal, "_LOGGER_PROVIDER", None)
    monkeypatch.setattr(logs_internal, "_LOGGER_PROVIDER_SET_ONCE", Once())
    for module, name, value in (
        (bridge, "_installed", None),
        (bridge, "_mode", None),
        (bridge, "_attached", {}),
        (logs, "_attached", {}),
    ):
        monkeypatch.setattr(module, name, value)
    monkeypatch.delenv(bridge.GLOBAL_PROVIDER_ENV, raising=False)
    yield


def gemini(role: str, text: str) -> dict[str, object]:
    """A google-genai ``Content.model_dump()`` (unset fields are None)."""
    return {"role": role, "parts": [{"text": text, "function_call": None, "thought": None}]}


def adk_style_call(question: str) -> None:
    """What Google ADK does per model call: a generate_content span, messages as GenAI log events."""
    otel = trace_api.get_tracer("google.adk.fake")
    events = logs_api.get_logger("google.adk.fake")
    with otel.start_as_current_span(
        "generate_content m", attributes={"gen_ai.operation.name": "generate_content"}
    ):
        events.emit(LogRecord(event_name="gen_ai.system.message", body={"content": "be brief"}))
        events.emit(LogRecord(event_name="gen_ai.user.message", body={"content": gemini("user", question)}))
        events.emit(LogRecord(event_name="gen_ai.choice", body={"content": gemini("model", "4"), "index": 0}))


async def test_adk_style_log_events_become_the_calls_messages(
    fresh_globals: None, store: InMemoryLightningStore
) -> None:
    tracer = OtelTracer(flush_timeout=10.0, instrument_llm_clients=False)
    tracer.init_worker(0, store)
    try:
        rollout_id, attempt_id = await new_attempt(store)
        async with tracer.trace_context("agent", rollout_id=rollout_id, attempt_id=attempt_id):
            adk_style_call("2+2?")
        adk_style_call("outside any rollout: ignored")
    finally:
        tracer.teardown_worker(0)
    spans = list(await store.query_spans(rollout_id))
    (sample,) = TraceToMessages().adapt(spans)
    assert sample["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
    ]
    _, report = TracerTraceToTriplet().adapt_with_report(spans)
    assert "unreadable_llm_spans" not in report.codes() and "empty_prompt" not in report.codes()


async def test_semantic_kernel_style_python_log_records_reach_the_span(
    fresh_globals: None, store: InMemoryLightningStore
) -> None:
    """Semantic Kernel logs each message with ``extra={"event.name": ...}``; its docs attach OTel's handler.

    (The application sets its own logger provider first; agl adds its processor to it.)
    """
    provider = LoggerProvider()
    logs_api.set_logger_provider(provider)  # the application's own provider, set before agl starts
    handler = LoggingHandler(logger_provider=provider)
    sk_logger = logging.getLogger("semantic_kernel.fake")
    sk_logger.addHandler(handler)
    sk_logger.setLevel(logging.INFO)
    tracer = OtelTracer(flush_timeout=10.0, instrument_llm_clients=False)
    tracer.init_worker(0, store)
    try:
        rollout_id, attempt_id = await new_attempt(store)
        async with tracer.trace_context("agent", rollout_id=rollout_id, attempt_id=attempt_id):
            otel = trace_api.get_tracer("semantic_kernel.fake")
            with otel.start_as_current_span(
                "chat.completions m", attributes={"gen_ai.operation.name": "chat"}
            ):
                user = json.dumps({"role": "user", "content": "hi"})
                sk_logger.info(user, extra={"event.name": "gen_ai.user.message", "gen_ai.system": "openai"})
                choice = json.dumps(
                    {"message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}
                )
                sk_logger.info(choice, extra={"event.name": "gen_ai.choice", "gen_ai.system": "openai"})
    finally:
        tracer.teardown_worker(0)
        sk_logger.removeHandler(handler)
    (sample,) = TraceToMessages().adapt(list(await store.query_spans(rollout_id)))
    assert sample["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
