"""A real ``openai`` client against a local OpenAI-compatible server, traced with no code change."""

from __future__ import annotations

import json

import openai
import pytest

from agl_core.instrumentation.openai import instrument_openai, is_openai_instrumented, uninstrument_openai
from agl_core.semconv import (
    AGL_LLM_SOURCE,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_REQUEST_TOOLS,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_ID,
    GEN_AI_TOOL_DEFINITIONS,
    GEN_AI_USAGE_INPUT_TOKENS,
    LOGPROBS_CONTENT,
    PROMPT_TOKEN_IDS,
    RESPONSE_TOKEN_IDS,
)
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer.otel import OtelTracer
from agl_core.types import Span
from agl_testing.fake_openai import FakeOpenAIServer, Reply, ToolCall
from tests.tracer._helpers import new_attempt

TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {}}}},
    }
]


def llm_spans(spans: list[Span]) -> list[Span]:
    return [s for s in spans if GEN_AI_OPERATION_NAME in s.attributes]


async def test_chat_calls_sync_and_async_land_in_store_with_content_and_token_ids(
    tracer: OtelTracer, store: InMemoryLightningStore, llm_server: FakeOpenAIServer
) -> None:
    tokenizer = llm_server.tokenizer
    client = openai.OpenAI(api_key="test", base_url=llm_server.base_url)
    aclient = openai.AsyncOpenAI(api_key="test", base_url=llm_server.base_url)
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        first = client.chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "what is two plus two"}], logprobs=True
        )
        second = await aclient.chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "and three"}]
        )
    spans = list(await store.query_spans(rollout_id))
    assert [s.name for s in spans] == ["chat policy", "chat policy"]
    assert [s.sequence_id for s in spans] == sorted(s.sequence_id for s in spans)
    assert spans[0].sequence_id < spans[1].sequence_id
    a, b = spans
    assert (a.rollout_id, a.attempt_id) == (rollout_id, attempt_id)
    assert a.attributes[GEN_AI_REQUEST_MODEL] == "policy"
    assert a.attributes[GEN_AI_RESPONSE_ID] == first.id and b.attributes[GEN_AI_RESPONSE_ID] == second.id
    assert a.attributes[AGL_LLM_SOURCE] == "tracer"
    assert a.attributes[PROMPT_TOKEN_IDS] == first.model_extra["prompt_token_ids"]
    assert a.attributes[RESPONSE_TOKEN_IDS] == tokenizer.encode("what is two plus two")
    assert a.attributes[GEN_AI_USAGE_INPUT_TOKENS] == len(first.model_extra["prompt_token_ids"])
    inputs = json.loads(str(a.attributes[GEN_AI_INPUT_MESSAGES]))
    assert inputs == [{"role": "user", "parts": [{"type": "text", "content": "what is two plus two"}]}]
    outputs = json.loads(str(a.attributes[GEN_AI_OUTPUT_MESSAGES]))
    assert outputs[0]["parts"][0]["content"] == "what is two plus two"
    logprobs = json.loads(str(a.attributes[LOGPROBS_CONTENT]))
    assert [entry["token"] for entry in logprobs] == tokenizer.pieces("what is two plus two")
    assert LOGPROBS_CONTENT not in b.attributes  # not requested
    assert b.attributes[RESPONSE_TOKEN_IDS] == tokenizer.encode("and three")


async def test_streaming_chat_accumulates_token_ids_and_finish_reasons(
    tracer: OtelTracer, store: InMemoryLightningStore, llm_server: FakeOpenAIServer
) -> None:
    client = openai.OpenAI(api_key="test", base_url=llm_server.base_url)
    aclient = openai.AsyncOpenAI(api_key="test", base_url=llm_server.base_url)
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        text = "".join(
            chunk.choices[0].delta.content or ""
            for chunk in client.chat.completions.create(
                model="policy",
                messages=[{"role": "user", "content": "stream me please"}],
                stream=True,
                logprobs=True,
            )
            if chunk.choices
        )
        stream = await aclient.chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "async stream"}], stream=True
        )
        async for _ in stream:
            pass
    assert text == "stream me please"
    sync_span, async_span = llm_spans(list(await store.query_spans(rollout_id)))
    assert sync_span.attributes[RESPONSE_TOKEN_IDS] == llm_server.tokenizer.encode("stream me please")
    assert async_span.attributes[RESPONSE_TOKEN_IDS] == llm_server.tokenizer.encode("async stream")
    assert isinstance(sync_span.attributes[PROMPT_TOKEN_IDS], list) and sync_span.attributes[PROMPT_TOKEN_IDS]
    assert sync_span.attributes[GEN_AI_RESPONSE_FINISH_REASONS] == ["stop"]
    assert len(json.loads(str(sync_span.attributes[LOGPROBS_CONTENT]))) == 5
    outputs = json.loads(str(async_span.attributes[GEN_AI_OUTPUT_MESSAGES]))
    assert outputs[0]["parts"] == [{"type": "text", "content": "async stream"}]


async def test_tools_tool_calls_and_images_are_recorded(
    tracer: OtelTracer, store: InMemoryLightningStore
) -> None:
    reply = Reply(tool_calls=[ToolCall(name="get_weather", arguments={"city": "Oslo"}, id="call_1")])
    with FakeOpenAIServer([reply, "It is sunny."], token_ids="always") as server:
        client = openai.OpenAI(api_key="test", base_url=server.base_url)
        rollout_id, attempt_id = await new_attempt(store)
        messages: list[dict[str, object]] = [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather where this photo was taken?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
            }
        ]
        async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
            first = client.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
            call = first.choices[0].message.tool_calls[0]
            messages += [
                first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
            ]
            client.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
    tool_span, answer_span = llm_spans(list(await store.query_spans(rollout_id)))
    definitions = json.loads(str(tool_span.attributes[GEN_AI_TOOL_DEFINITIONS]))
    assert definitions == [{"type": "function", **TOOLS[0]["function"]}]  # the current GenAI form
    assert GEN_AI_REQUEST_TOOLS not in tool_span.attributes
    assert tool_span.attributes[GEN_AI_RESPONSE_FINISH_REASONS] == ["tool_calls"]
    (user,) = json.loads(str(tool_span.attributes[GEN_AI_INPUT_MESSAGES]))
    assert user["parts"] == [
        {"type": "text", "content": "Weather where this photo was taken?"},
        {"type": "uri", "modality": "image", "uri": "data:image/png;base64,AAAA", "mime_type": None},
    ]
    (output,) = json.loads(str(tool_span.attributes[GEN_AI_OUTPUT_MESSAGES]))
    assert output["parts"][0] == {
        "type": "tool_call",
        "id": "call_1",
        "name": "get_weather",
        "arguments": {"city": "Oslo"},
    }
    history = json.loads(str(answer_span.attributes[GEN_AI_INPUT_MESSAGES]))
    assert [m["role"] for m in history] == ["user", "assistant", "tool"]
    assert history[2]["parts"] == [{"type": "tool_call_response", "id": "call_1", "response": "sunny"}]


async def test_text_completions_streaming_and_not(
    tracer: OtelTracer, store: InMemoryLightningStore, llm_server: FakeOpenAIServer
) -> None:
    tokenizer = llm_server.tokenizer
    client = openai.OpenAI(api_key="test", base_url=llm_server.base_url)
    aclient = openai.AsyncOpenAI(api_key="test", base_url=llm_server.base_url)
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        client.completions.create(model="base", prompt="one two", logprobs=1)
        stream = await aclient.completions.create(model="base", prompt="three four", stream=True)
        async for _ in stream:
            pass
    plain, streamed = llm_spans(list(await store.query_spans(rollout_id)))
    assert plain.name == "text_completion base" and streamed.name == "text_completion base"
    assert plain.attributes[GEN_AI_OPERATION_NAME] == "text_completion"
    assert plain.attributes[PROMPT_TOKEN_IDS] == tokenizer.encode("one two")
    assert plain.attributes[RESPONSE_TOKEN_IDS] == tokenizer.encode("one two")
    assert [e["token"] for e in json.loads(str(plain.attributes[LOGPROBS_CONTENT]))] == ["one", " ", "two"]
    assert streamed.attributes[RESPONSE_TOKEN_IDS] == tokenizer.encode("three four")
    assert streamed.attributes[PROMPT_TOKEN_IDS] == tokenizer.encode("three four")
    assert (
        json.loads(str(streamed.attributes[GEN_AI_OUTPUT_MESSAGES]))[0]["parts"][0]["content"] == "three four"
    )
    assert streamed.end_time is not None and streamed.status.status_code != "ERROR"


async def test_failed_call_is_recorded_as_error_span(
    tracer: OtelTracer, store: InMemoryLightningStore, llm_server: FakeOpenAIServer
) -> None:
    from agl_testing.fake_openai import Fault

    client = openai.OpenAI(api_key="test", base_url=llm_server.base_url, max_retries=0)
    llm_server.fail_next(Fault(status=400, message="bad prompt"))
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "x"}])
    (span,) = await store.query_spans(rollout_id)
    assert span.status.status_code == "ERROR"
    assert RESPONSE_TOKEN_IDS not in span.attributes


async def test_calls_outside_a_trace_are_not_recorded(
    tracer: OtelTracer, llm_server: FakeOpenAIServer
) -> None:
    client = openai.OpenAI(api_key="test", base_url=llm_server.base_url)
    reply = client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "untraced"}])
    assert reply.choices[0].message.content == "untraced"
    async with tracer.trace_context():
        pass
    assert tracer.get_last_trace() == []


def test_instrumentation_nests_and_restores_the_client() -> None:
    original_chat = openai.resources.chat.completions.Completions.create
    original_text = openai.resources.completions.Completions.create
    instrument_openai()
    instrument_openai()
    assert is_openai_instrumented()
    assert openai.resources.chat.completions.Completions.create is not original_chat
    uninstrument_openai()
    assert is_openai_instrumented()
    uninstrument_openai()
    assert not is_openai_instrumented()
    assert openai.resources.chat.completions.Completions.create is original_chat
    assert openai.resources.completions.Completions.create is original_text
    uninstrument_openai()  # extra calls are no-ops


async def test_structured_output_parse_is_one_span(
    tracer: OtelTracer, store: InMemoryLightningStore, llm_server: FakeOpenAIServer
) -> None:
    from pydantic import BaseModel

    class City(BaseModel):
        city: str

    client = openai.OpenAI(api_key="test", base_url=llm_server.base_url)
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        parsed = client.chat.completions.parse(
            model="policy", messages=[{"role": "user", "content": '{"city": "Oslo"}'}], response_format=City
        )
    assert parsed.choices[0].message.parsed == City(city="Oslo")
    (span,) = llm_spans(list(await store.query_spans(rollout_id)))
    assert span.name == "chat policy"
    assert span.attributes[RESPONSE_TOKEN_IDS] == llm_server.tokenizer.encode('{"city": "Oslo"}')
