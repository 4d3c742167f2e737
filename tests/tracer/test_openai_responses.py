"""``client.responses.create`` (the Responses API) traced with no code change: sync, async, streamed."""

from __future__ import annotations

import json

import openai

from agl_core.adapter import TracerTraceToTriplet, TraceToMessages
from agl_core.emitter import emit_reward
from agl_core.semconv import (
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_ID,
    GEN_AI_SYSTEM_INSTRUCTIONS,
    GEN_AI_TOOL_DEFINITIONS,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    LOGPROBS_CONTENT,
    PROMPT_TOKEN_IDS,
    RESPONSE_TOKEN_IDS,
)
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer.otel import OtelTracer
from agl_testing.fake_openai import FakeOpenAIServer, Reply, ToolCall
from tests.tracer._helpers import new_attempt

TOOL = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}


async def test_responses_sync_and_async_with_token_ids_and_content(
    tracer: OtelTracer, store: InMemoryLightningStore, llm_server: FakeOpenAIServer
) -> None:
    tokenizer = llm_server.tokenizer
    client = openai.OpenAI(api_key="test", base_url=llm_server.base_url)
    aclient = openai.AsyncOpenAI(api_key="test", base_url=llm_server.base_url)
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        first = client.responses.create(
            model="policy",
            input="what is two plus two",
            instructions="Answer briefly.",
            include=["message.output_text.logprobs"],
        )
        second = await aclient.responses.create(
            model="policy", input=[{"role": "user", "content": [{"type": "input_text", "text": "and three"}]}]
        )
        emit_reward(1.0)
    a, b, _reward = await store.query_spans(rollout_id)
    assert (a.name, b.name) == ("responses policy", "responses policy")
    assert a.attributes[GEN_AI_OPERATION_NAME] == "responses"
    assert a.attributes[GEN_AI_RESPONSE_ID] == first.id and b.attributes[GEN_AI_RESPONSE_ID] == second.id
    assert a.attributes[PROMPT_TOKEN_IDS] == first.model_extra["prompt_token_ids"]
    assert a.attributes[RESPONSE_TOKEN_IDS] == tokenizer.encode("what is two plus two")
    assert b.attributes[RESPONSE_TOKEN_IDS] == tokenizer.encode("and three")
    assert a.attributes[GEN_AI_USAGE_INPUT_TOKENS] == first.usage.input_tokens
    assert a.attributes[GEN_AI_USAGE_OUTPUT_TOKENS] == first.usage.output_tokens
    assert a.attributes[GEN_AI_RESPONSE_FINISH_REASONS] == ["stop"]
    assert json.loads(str(a.attributes[GEN_AI_SYSTEM_INSTRUCTIONS])) == [
        {"type": "text", "content": "Answer briefly."}
    ]
    assert json.loads(str(a.attributes[GEN_AI_INPUT_MESSAGES])) == [
        {"role": "user", "parts": [{"type": "text", "content": "what is two plus two"}]}
    ]
    outputs = json.loads(str(a.attributes[GEN_AI_OUTPUT_MESSAGES]))
    assert outputs == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": first.output_text}],
            "finish_reason": "stop",
        }
    ]
    assert len(json.loads(str(a.attributes[LOGPROBS_CONTENT]))) == len(a.attributes[RESPONSE_TOKEN_IDS])
    assert LOGPROBS_CONTENT not in b.attributes
    # the adapters read these spans as they read chat spans
    triplets = TracerTraceToTriplet().adapt(await store.query_spans(rollout_id))
    assert [t.reward for t in triplets] == [None, 1.0]
    assert triplets[0].prompt["raw_content"] == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "what is two plus two"},
    ]
    assert triplets[0].response["token_ids"] == tokenizer.encode("what is two plus two")


async def test_streamed_responses_sync_async_and_stream_helper(
    tracer: OtelTracer, store: InMemoryLightningStore, llm_server: FakeOpenAIServer
) -> None:
    tokenizer = llm_server.tokenizer
    client = openai.OpenAI(api_key="test", base_url=llm_server.base_url)
    aclient = openai.AsyncOpenAI(api_key="test", base_url=llm_server.base_url)
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        text = "".join(
            event.delta
            for event in client.responses.create(model="policy", input="stream me please", stream=True)
            if event.type == "response.output_text.delta"
        )
        stream = await aclient.responses.create(model="policy", input="async stream", stream=True)
        async for _ in stream:
            pass
        with client.responses.stream(model="policy", input="helper stream") as events:
            final = events.get_final_response()
    assert text == "stream me please" and final.output_text == "helper stream"
    spans = [s for s in await store.query_spans(rollout_id) if GEN_AI_OPERATION_NAME in s.attributes]
    assert len(spans) == 3  # one span per call, the helper included
    for span, said in zip(spans, ("stream me please", "async stream", "helper stream"), strict=True):
        assert span.attributes[RESPONSE_TOKEN_IDS] == tokenizer.encode(said)
        assert span.attributes[PROMPT_TOKEN_IDS]
        assert json.loads(str(span.attributes[GEN_AI_OUTPUT_MESSAGES]))[0]["parts"][0]["content"] == said
        assert span.end_time is not None and span.status.status_code != "ERROR"


async def test_responses_tool_calls_and_function_outputs_read_as_chat(
    tracer: OtelTracer, store: InMemoryLightningStore
) -> None:
    call = Reply(tool_calls=[ToolCall(name="get_weather", arguments={"city": "Oslo"}, id="call_1")])
    with FakeOpenAIServer([call, "It is sunny."], token_ids="always") as server:
        client = openai.OpenAI(api_key="test", base_url=server.base_url)
        rollout_id, attempt_id = await new_attempt(store)
        async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
            first = client.responses.create(model="policy", input="Weather in Oslo?", tools=[TOOL])
            (function_call,) = [item for item in first.output if item.type == "function_call"]
            history = [
                {"role": "user", "content": "Weather in Oslo?"},
                function_call.model_dump(exclude_none=True),
                {"type": "function_call_output", "call_id": function_call.call_id, "output": "sunny"},
            ]
            client.responses.create(model="policy", input=history, tools=[TOOL])
    tool_span, answer_span = await store.query_spans(rollout_id)
    assert json.loads(str(tool_span.attributes[GEN_AI_TOOL_DEFINITIONS])) == [TOOL]
    assert tool_span.attributes[GEN_AI_RESPONSE_FINISH_REASONS] == ["tool_calls"]
    (sample_1, sample_2) = TraceToMessages().adapt([tool_span, answer_span])
    assert sample_1["tools"] == [
        {"type": "function", "function": {"name": "get_weather", "parameters": TOOL["parameters"]}}
    ]
    assert sample_1["messages"][-1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert [m["role"] for m in sample_2["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert sample_2["messages"][2] == {
        "role": "tool",
        "tool_call_id": function_call.call_id,
        "content": "sunny",
    }
    assert sample_2["messages"][3]["content"] == "It is sunny."


async def test_failed_responses_call_is_an_error_span(
    tracer: OtelTracer, store: InMemoryLightningStore, llm_server: FakeOpenAIServer
) -> None:
    from agl_testing.fake_openai import Fault

    client = openai.OpenAI(api_key="test", base_url=llm_server.base_url, max_retries=0)
    llm_server.fail_next(Fault(status=400, message="bad input"))
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        try:
            client.responses.create(model="policy", input="x")
        except openai.BadRequestError:
            pass
        else:
            raise AssertionError("the fake server was told to fail")
    (span,) = await store.query_spans(rollout_id)
    assert span.status.status_code == "ERROR"
    assert span.attributes["error.type"] == "BadRequestError"


async def test_raw_and_streaming_response_wrappers_record_the_parsed_body(
    tracer: OtelTracer, store: InMemoryLightningStore, llm_server: FakeOpenAIServer
) -> None:
    """``with_raw_response`` / ``with_streaming_response`` (the OpenAI Agents SDK streams this way)."""
    tokenizer = llm_server.tokenizer
    client = openai.OpenAI(api_key="test", base_url=llm_server.base_url)
    aclient = openai.AsyncOpenAI(api_key="test", base_url=llm_server.base_url)
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        raw = client.chat.completions.with_raw_response.create(
            model="policy", messages=[{"role": "user", "content": "raw chat"}]
        )
        assert raw.http_response.status_code == 200
        assert raw.parse().choices[0].message.content == "raw chat"
        async with aclient.responses.with_streaming_response.create(
            model="policy", input="raw stream", stream=True
        ) as response:
            assert isinstance(response, openai.AsyncAPIResponse)
            stream = await response.parse()
            async for _ in stream:
                pass
    chat_span, responses_span = await store.query_spans(rollout_id)
    assert chat_span.attributes[RESPONSE_TOKEN_IDS] == tokenizer.encode("raw chat")
    assert responses_span.attributes[RESPONSE_TOKEN_IDS] == tokenizer.encode("raw stream")
    assert json.loads(str(responses_span.attributes[GEN_AI_OUTPUT_MESSAGES]))[0]["parts"][0]["content"] == (
        "raw stream"
    )
