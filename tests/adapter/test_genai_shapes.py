"""One normalisation layer: the same LLM call recorded in every widespread span shape reads the same."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agl_core.adapter import TracerTraceToTriplet, TraceToMessages
from agl_core.adapter.genai import compat_span_name, is_llm_span, read_llm_call
from agl_core.types import Span

from .traces import TraceBuilder, user

WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
ARGS = '{"city": "Oslo"}'
EXPECTED_PROMPT = [
    {"role": "system", "content": "You are a weather bot."},
    {"role": "user", "content": "Weather in Oslo?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ARGS}}
        ],
    },
    {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
]
EXPECTED_COMPLETION = [{"role": "assistant", "content": "It is sunny in Oslo."}]
EXPECTED_TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "Weather of a city", "parameters": WEATHER_SCHEMA},
    }
]


def otel_genai() -> dict[str, Any]:
    parts_in = [
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Oslo?"}]},
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Oslo"}}
            ],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "sunny"}]},
    ]
    out = [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "It is sunny in Oslo."}],
            "finish_reason": "stop",
        }
    ]
    tools = [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather of a city",
            "parameters": WEATHER_SCHEMA,
        }
    ]
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-x",
        "gen_ai.response.model": "gpt-x-2025",
        "gen_ai.response.id": "resp-1",
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "You are a weather bot."}]),
        "gen_ai.input.messages": json.dumps(parts_in),
        "gen_ai.output.messages": json.dumps(out),
        "gen_ai.tool.definitions": json.dumps(tools),
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 7,
    }


def openllmetry() -> dict[str, Any]:
    return {
        "llm.request.type": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-x",
        "gen_ai.response.model": "gpt-x-2025",
        "gen_ai.response.id": "resp-1",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "You are a weather bot.",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": "Weather in Oslo?",
        "gen_ai.prompt.2.role": "assistant",
        "gen_ai.prompt.2.tool_calls.0.id": "call_1",
        "gen_ai.prompt.2.tool_calls.0.name": "get_weather",
        "gen_ai.prompt.2.tool_calls.0.arguments": ARGS,
        "gen_ai.prompt.3.role": "tool",
        "gen_ai.prompt.3.content": "sunny",
        "gen_ai.prompt.3.tool_call_id": "call_1",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "It is sunny in Oslo.",
        "gen_ai.completion.0.finish_reason": "stop",
        "llm.request.functions.0.name": "get_weather",
        "llm.request.functions.0.description": "Weather of a city",
        "llm.request.functions.0.parameters": json.dumps(WEATHER_SCHEMA),
        "gen_ai.usage.prompt_tokens": 30,
        "gen_ai.usage.completion_tokens": 7,
    }


def openinference() -> dict[str, Any]:
    prefix = "llm.input_messages"
    return {
        "openinference.span.kind": "LLM",
        "llm.provider": "openai",
        "llm.model_name": "gpt-x-2025",
        f"{prefix}.0.message.role": "system",
        f"{prefix}.0.message.content": "You are a weather bot.",
        f"{prefix}.1.message.role": "user",
        f"{prefix}.1.message.contents.0.message_content.type": "text",
        f"{prefix}.1.message.contents.0.message_content.text": "Weather in Oslo?",
        f"{prefix}.2.message.role": "assistant",
        f"{prefix}.2.message.tool_calls.0.tool_call.id": "call_1",
        f"{prefix}.2.message.tool_calls.0.tool_call.function.name": "get_weather",
        f"{prefix}.2.message.tool_calls.0.tool_call.function.arguments": ARGS,
        f"{prefix}.3.message.role": "tool",
        f"{prefix}.3.message.content": "sunny",
        f"{prefix}.3.message.tool_call_id": "call_1",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "It is sunny in Oslo.",
        "llm.tools.0.tool.json_schema": json.dumps(EXPECTED_TOOLS[0]),
        "llm.token_count.prompt": 30,
        "llm.token_count.completion": 7,
        "output.mime_type": "application/json",
        "output.value": json.dumps({"id": "resp-1", "object": "chat.completion"}),
    }


def add_message_events(span: Any) -> None:
    """The GenAI per-message events (semantic conventions 1.28 - 1.36) recorded on the span."""
    span.add_event("gen_ai.system.message", {"content": "You are a weather bot."})
    span.add_event("gen_ai.user.message", {"content": "Weather in Oslo?"})
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ARGS}}
    span.add_event("gen_ai.assistant.message", {"gen_ai.event.content": json.dumps({"tool_calls": [call]})})
    span.add_event("gen_ai.tool.message", {"content": "sunny", "id": "call_1"})
    choice = {"index": 0, "finish_reason": "stop", "message": {"content": "It is sunny in Oslo."}}
    span.add_event("gen_ai.choice", {"gen_ai.event.content": json.dumps(choice)})


def add_content_events(span: Any) -> None:
    """The first GenAI form (semantic conventions 1.27): whole prompt / completion as event attributes."""
    span.add_event("gen_ai.content.prompt", {"gen_ai.prompt": json.dumps(EXPECTED_PROMPT)})
    span.add_event("gen_ai.content.completion", {"gen_ai.completion": json.dumps(EXPECTED_COMPLETION)})


def record(name: str, attributes: dict[str, Any], events: Any = None) -> Span:
    b = TraceBuilder()
    with b.span(name, 0, 1, **attributes) as span:
        if events is not None:
            events(span)
    (stored,) = b.spans()
    return stored


def canonical(messages: Any) -> Any:
    """Tool-call arguments compared as JSON values, not strings."""
    out = json.loads(json.dumps(messages))
    for message in out or []:
        for call in message.get("tool_calls") or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out


CASES = {
    "otel-genai": ("chat gpt-x", otel_genai(), None),
    "openllmetry": ("openai.chat", openllmetry(), None),
    "openinference": ("ChatOpenAI", openinference(), None),
    "otel-genai-events": ("chat gpt-x", {"gen_ai.operation.name": "chat"}, add_message_events),
    "otel-genai-events-1.27": ("chat gpt-x", {"gen_ai.system": "openai"}, add_content_events),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_shape_reads_as_the_same_call(case: str) -> None:
    name, attributes, events = CASES[case]
    span = record(name, attributes, events)
    call = read_llm_call(span, strict=True)
    assert call is not None and call.readable
    assert call.shape == case.removesuffix("-1.27")
    assert canonical(call.prompt_messages) == canonical(EXPECTED_PROMPT)
    assert call.completion_messages == EXPECTED_COMPLETION
    if "events" not in case:
        assert call.tools == EXPECTED_TOOLS
        assert call.response_id == "resp-1"
        assert call.model == "gpt-x-2025"
        assert (call.usage.input_tokens, call.usage.output_tokens) == (30, 7)
    assert compat_span_name(span) == "openai.chat.completion"


def test_non_llm_spans_are_not_llm_calls() -> None:
    assert not is_llm_span(record("execute_tool get_weather", {"gen_ai.operation.name": "execute_tool"}))
    assert not is_llm_span(record("retrieve", {"openinference.span.kind": "RETRIEVER"}))
    assert not is_llm_span(record("LangGraph", {"langchain.chain.type": "agent"}))
    assert read_llm_call(record("step", {"x": 1})) is None


def test_adapters_read_openinference_and_drop_the_wrapper_of_agls_own_span() -> None:
    """A framework's LLM span (OpenInference) around agl's span of the same call: one triplet, one sample."""
    b = TraceBuilder()
    agl_call = b.llm_attributes([user("Weather in Oslo?")], "It is sunny in Oslo.", response_id="resp-9")
    wrapper = {k: v for k, v in openinference().items() if not k.startswith("output.")}  # LangChain's output
    with (
        b.agent("weather", 0, 100),
        b.span("ChatOpenAI", 1, 50, **wrapper),
        b.span("chat qwen", 2, 49, **agl_call),
    ):
        pass
    b.reward(60, 1.0)
    spans = b.spans()
    triplets, report = TracerTraceToTriplet(agent_match="weather").adapt_with_report(spans)
    assert [(t.metadata["response_id"], t.reward) for t in triplets] == [("resp-9", 1.0)]
    assert triplets[0].response["token_ids"] == [4, 5]
    assert report.codes() == ["nested_llm_calls"]
    (sample,) = TraceToMessages().adapt(spans)  # one call, one sample: from agl's record (token ids)
    assert sample["messages"][0] == {"role": "user", "content": "Weather in Oslo?"}
    only_openinference = [s for s in spans if s.name != "chat qwen"]
    (triplet,) = TracerTraceToTriplet().adapt(only_openinference)
    assert canonical(triplet.prompt["raw_content"]) == canonical(EXPECTED_PROMPT)
    assert triplet.reward == 1.0


def test_same_sample_from_nested_spans_appears_once() -> None:
    b = TraceBuilder()
    attrs = b.llm_attributes([user("hi")], "hello", response_id=None, prompt_ids=None, response_ids=None)
    inner = dict(attrs)
    del attrs["gen_ai.response.id"]
    with b.span("LLM wrapper", 0, 10, **attrs), b.span("chat qwen", 1, 9, **inner):
        pass
    assert len(TraceToMessages().adapt(b.spans())) == 1


def test_03_name_patterns_find_agl_spans_by_their_compat_name() -> None:
    b = TraceBuilder()
    b.llm(0, 1, [user("hi")], "hello", response_id="r1")
    with b.span("ChatOpenAI", 2, 3, **openinference()):
        pass
    with b.span("retrieve", 4, 5, **{"openinference.span.kind": "RETRIEVER"}):
        pass
    adapter = TracerTraceToTriplet(llm_call_match=r"openai\.chat\.completion")
    assert [t.metadata["response_id"] for t in adapter.adapt(b.spans())] == ["r1", "resp-1"]
    by_name = TracerTraceToTriplet(llm_call_match=r"^ChatOpenAI$")
    assert [t.metadata["response_id"] for t in by_name.adapt(b.spans())] == ["resp-1"]


def test_an_unreadable_llm_span_is_kept_and_its_keys_are_named() -> None:
    b = TraceBuilder()
    with b.span("vendor.llm.call", 0, 1, **{"llm.request.type": "chat", "vendor.prompt_blob": "x"}):
        pass
    spans = b.spans()
    triplets, report = TracerTraceToTriplet().adapt_with_report(spans)
    assert len(triplets) == 1 and triplets[0].prompt["raw_content"] is None  # kept, not dropped
    problem = report.get("unreadable_llm_spans")
    assert problem is not None and problem.severity == "warning"
    assert "vendor.prompt_blob" in problem.message and "llm.request.type" in problem.message
