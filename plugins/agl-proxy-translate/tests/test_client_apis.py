"""/v1/responses and /v1/messages through the proxy, served by chat-only backends, parsed by the real SDKs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from aiohttp import web

from agl_core.adapter.doctor import diagnose_rollout
from agl_core.llm_proxy import LLMProxy
from agl_core.llm_proxy.recording import CLIENT_API, TOKEN_IDS_MISSING
from agl_core.store.memory import InMemoryLightningStore
from agl_testing.fake_openai import (
    FakeOpenAIServer,
    FakeTokenizer,
    Fault,
    Reply,
    Rule,
    ToolCall,
    render_chat_prompt,
    render_reply,
)
from tests.conftest import Rollout

PARALLEL = Reply(
    content="Checking both.",
    tool_calls=[
        ToolCall("get_weather", {"city": "Paris"}, id="call_p"),
        ToolCall("get_weather", {"city": "Oslo"}, id="call_o"),
    ],
)
RULES = [Rule(when="weather", reply=PARALLEL)]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
RESPONSES_TOOL = {"type": "function", "name": "get_weather", "description": "Weather", "parameters": SCHEMA}
ANTHROPIC_TOOL = {"name": "get_weather", "description": "Weather", "input_schema": SCHEMA}
CHAT_TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "description": "Weather", "parameters": SCHEMA},
}
IMAGE_URL = "data:image/png;base64,iVBORw0KGgo="


@pytest.fixture
async def chat_backend() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(rules=RULES) as server:
        yield server


@pytest.fixture
async def routed(
    store: InMemoryLightningStore, chat_backend: FakeOpenAIServer, rollout: Rollout
) -> AsyncIterator[str]:
    """The rollout's base URL on a proxy whose only backend speaks chat completions."""
    async with LLMProxy({"m": chat_backend.base_url}, store=store, token="tok") as proxy:
        yield proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint


async def _spans(store: InMemoryLightningStore, rollout: Rollout, count: int = 1) -> list[Any]:
    """The rollout's spans once ``count`` arrived (the proxy writes them from a background task)."""
    for _ in range(400):  # bounded wait
        spans = list(await store.query_spans(rollout.rollout_id))
        if len(spans) >= count:
            return spans
        await asyncio.sleep(0.05)
    raise AssertionError(f"expected {count} span(s)")


def _chat_requests(backend: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in backend.requests if r.path == "/v1/chat/completions"]


# ---------------------------------------------------------------------------------------------- Responses


async def test_responses_round_trip_with_parallel_calls_tool_results_system_and_images(
    routed: str, chat_backend: FakeOpenAIServer, store: InMemoryLightningStore, rollout: Rollout
) -> None:
    client = openai.AsyncOpenAI(base_url=routed, api_key="tok")
    first = await client.responses.create(
        model="m",
        instructions="You are terse.",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "weather? "},
                    {"type": "input_image", "image_url": IMAGE_URL},
                ],
            }
        ],
        tools=[RESPONSES_TOOL],
    )
    assert first.output_text == "Checking both."
    calls = [item for item in first.output if item.type == "function_call"]
    assert [(c.call_id, json.loads(c.arguments)) for c in calls] == [
        ("call_p", {"city": "Paris"}),
        ("call_o", {"city": "Oslo"}),
    ]
    assert first.usage is not None and first.usage.input_tokens > 0
    sent = _chat_requests(chat_backend)[-1]
    assert sent["messages"] == [
        {"role": "system", "content": "You are terse."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "weather? "},
                {"type": "image_url", "image_url": {"url": IMAGE_URL}},
            ],
        },
    ]
    assert sent["tools"] == [CHAT_TOOL] and sent["return_token_ids"] is True

    second = await client.responses.create(
        model="m",
        instructions="You are terse.",
        input=[
            {"role": "user", "content": "weather?"},
            *[item.model_dump(exclude_none=True) for item in first.output],
            {"type": "function_call_output", "call_id": "call_p", "output": "sunny"},
            {"type": "function_call_output", "call_id": "call_o", "output": "rain"},
        ],
        tools=[RESPONSES_TOOL],
    )
    assert second.status == "completed"
    sent = _chat_requests(chat_backend)[-1]["messages"]
    assert sent[2]["role"] == "assistant" and sent[2]["content"] == "Checking both."
    assert [c["id"] for c in sent[2]["tool_calls"]] == ["call_p", "call_o"]  # one parallel turn
    assert sent[3:] == [
        {"role": "tool", "tool_call_id": "call_p", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_o", "content": "rain"},
    ]
    spans = await _spans(store, rollout, count=2)
    span = max(spans, key=lambda s: s.sequence_id)
    attrs = span.attributes
    assert attrs[CLIENT_API] == "openai.responses" and TOKEN_IDS_MISSING not in attrs
    tokenizer = FakeTokenizer()
    chat_messages = _chat_requests(chat_backend)[-1]["messages"]
    assert attrs["prompt_token_ids"] == tokenizer.encode(render_chat_prompt(chat_messages, [CHAT_TOOL]))
    expected = render_reply("Checking both.", [("get_weather", c.arguments) for c in calls])
    assert attrs["response_token_ids"] == tokenizer.encode(expected)
    assert attrs["gen_ai.operation.name"] == "chat"
    await client.close()


async def test_responses_stream_is_translated_event_by_event(
    routed: str, store: InMemoryLightningStore, rollout: Rollout
) -> None:
    client = openai.AsyncOpenAI(base_url=routed, api_key="tok")
    stream = await client.responses.create(
        model="m", input="weather please", tools=[RESPONSES_TOOL], stream=True
    )
    kinds, text, args, final, numbers = [], [], {}, None, []
    async for event in stream:
        kinds.append(event.type)
        numbers.append(event.sequence_number)
        if event.type == "response.output_text.delta":
            text.append(event.delta)
        elif event.type == "response.function_call_arguments.delta":
            args[event.item_id] = args.get(event.item_id, "") + event.delta
        elif event.type == "response.completed":
            final = event.response
    assert numbers == list(range(len(numbers)))
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert "".join(text) == "Checking both."
    assert final is not None and final.output_text == "Checking both."
    calls = [item for item in final.output if item.type == "function_call"]
    assert [json.loads(args[c.id]) for c in calls] == [{"city": "Paris"}, {"city": "Oslo"}]
    assert final.usage is not None and final.usage.output_tokens > 0
    async with client.responses.stream(model="m", input="plain text") as managed:
        done = await managed.get_final_response()
    assert done.output_text == "plain text"
    spans = await _spans(store, rollout)
    assert all(s.attributes["agl.llm.stream"] is True and "response_token_ids" in s.attributes for s in spans)
    await client.close()


async def test_responses_errors_come_back_typed(routed: str, chat_backend: FakeOpenAIServer) -> None:
    client = openai.AsyncOpenAI(base_url=routed, api_key="tok", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="previous_response_id"):
        await client.responses.create(model="m", input="x", previous_response_id="resp_1")
    with pytest.raises(openai.BadRequestError, match="input item type"):
        await client.responses.create(model="m", input=[{"type": "item_reference", "id": "x"}])
    with pytest.raises(openai.AuthenticationError):
        await openai.AsyncOpenAI(base_url=routed, api_key="wrong", max_retries=0).responses.create(
            model="m", input="x"
        )
    chat_backend.fail_next(Fault(status=429, message="slow down"))
    with pytest.raises(openai.RateLimitError, match="slow down"):
        await client.responses.create(model="m", input="x")
    long = await client.responses.create(model="m", input="one two three four", max_output_tokens=2)
    assert long.status == "incomplete" and long.incomplete_details is not None
    assert long.incomplete_details.reason == "max_output_tokens"
    await client.close()


# ---------------------------------------------------------------------------------------------- Anthropic


async def test_messages_round_trip_with_tools_results_system_and_images(
    routed: str, chat_backend: FakeOpenAIServer, store: InMemoryLightningStore, rollout: Rollout
) -> None:
    client = anthropic.AsyncAnthropic(base_url=routed.removesuffix("/v1"), api_key="tok")
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    first = await client.messages.create(
        model="m",
        max_tokens=100,
        system=[{"type": "text", "text": "You are terse."}],
        tools=[ANTHROPIC_TOOL],
        messages=[{"role": "user", "content": [{"type": "text", "text": "weather? "}, image]}],
    )
    assert first.stop_reason == "tool_use"
    assert [b.type for b in first.content] == ["text", "tool_use", "tool_use"]
    uses = [b for b in first.content if b.type == "tool_use"]
    assert [(u.id, u.input) for u in uses] == [("call_p", {"city": "Paris"}), ("call_o", {"city": "Oslo"})]
    sent = _chat_requests(chat_backend)[-1]
    assert sent["messages"][0] == {"role": "system", "content": "You are terse."}
    assert sent["messages"][1]["content"][1] == {"type": "image_url", "image_url": {"url": IMAGE_URL}}
    assert sent["max_tokens"] == 100 and sent["tools"] == [CHAT_TOOL]

    second = await client.messages.create(
        model="m",
        max_tokens=100,
        tools=[ANTHROPIC_TOOL],
        messages=[
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_p", "content": "sunny"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_o",
                        "content": [{"type": "text", "text": "rain"}],
                    },
                    {"type": "text", "text": "and so?"},
                ],
            },
        ],
    )
    assert second.content[0].type == "text" and second.content[0].text == "and so?"
    assert second.stop_reason == "end_turn"
    sent_messages = _chat_requests(chat_backend)[-1]["messages"]
    assert sent_messages[1]["tool_calls"][1]["function"] == {
        "name": "get_weather",
        "arguments": '{"city":"Oslo"}',
    }
    assert sent_messages[2:] == [
        {"role": "tool", "tool_call_id": "call_p", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_o", "content": "rain"},
        {"role": "user", "content": "and so?"},
    ]
    spans = await _spans(store, rollout)
    assert spans[0].attributes[CLIENT_API] == "anthropic.messages"
    assert spans[0].attributes["response_token_ids"]
    await client.close()


async def test_messages_stream_is_translated_event_by_event(routed: str) -> None:
    client = anthropic.AsyncAnthropic(base_url=routed.removesuffix("/v1"), api_key="tok")
    async with client.messages.stream(
        model="m",
        max_tokens=100,
        tools=[ANTHROPIC_TOOL],
        messages=[{"role": "user", "content": "weather now"}],
    ) as stream:
        texts = [text async for text in stream.text_stream]
        final = await stream.get_final_message()
    assert "".join(texts) == "Checking both."
    assert final.stop_reason == "tool_use"
    assert [b.input for b in final.content if b.type == "tool_use"] == [{"city": "Paris"}, {"city": "Oslo"}]
    assert final.usage.output_tokens > 0
    raw = await client.messages.create(
        model="m", max_tokens=100, messages=[{"role": "user", "content": "hi"}], stream=True
    )
    kinds = [event.type async for event in raw]
    assert kinds == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    await client.close()


async def test_messages_errors_use_anthropic_shapes(routed: str, chat_backend: FakeOpenAIServer) -> None:
    client = anthropic.AsyncAnthropic(base_url=routed.removesuffix("/v1"), api_key="tok", max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="max_tokens") as caught:
        await client.messages.create(model="m", max_tokens=0, messages=[{"role": "user", "content": "x"}])
    assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    with pytest.raises(anthropic.NotFoundError):
        await client.messages.create(model="nope", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    with pytest.raises(anthropic.AuthenticationError):
        await anthropic.AsyncAnthropic(
            base_url=routed.removesuffix("/v1"), api_key="bad", max_retries=0
        ).messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    chat_backend.fail_next(Fault(status=429, message="slow down"))
    with pytest.raises(anthropic.RateLimitError, match="slow down"):
        await client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    cut = await client.messages.create(
        model="m", max_tokens=2, messages=[{"role": "user", "content": "one two three"}]
    )
    assert cut.stop_reason == "max_tokens"
    await client.close()


# ------------------------------------------------------------------------------------------ other backends


async def test_missing_token_ids_are_said_on_the_span_never_retokenised(
    store: InMemoryLightningStore, rollout: Rollout
) -> None:
    async with (
        FakeOpenAIServer(token_ids="never") as backend,
        LLMProxy({"m": backend.base_url}, store=store) as proxy,
    ):
        url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint
        client = openai.AsyncOpenAI(base_url=url, api_key="x")
        await client.responses.create(model="m", input="hello")
        [span] = await _spans(store, rollout)
        await client.close()
    attrs = span.attributes
    assert "prompt_token_ids" not in attrs and "response_token_ids" not in attrs
    assert "no prompt_token_ids and no response_token_ids" in attrs[TOKEN_IDS_MISSING]
    report = await diagnose_rollout(store, rollout.rollout_id, adapter="proxy-triplet")
    [problem] = [p for p in report.report.problems if p.code == "missing_token_ids"]
    assert attrs[TOKEN_IDS_MISSING] in problem.message  # agl doctor quotes the proxy's reason


class _Sampler:
    """An in-process backend that streams natively and fails when asked to."""

    async def chat_completions(self, request: dict[str, Any]) -> dict[str, Any]:
        text = request["messages"][-1]["content"]
        return {
            "id": "chatcmpl-local",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                    "token_ids": [5, 6],
                }
            ],
            "prompt_token_ids": [1, 2, 3],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }

    async def stream_chat_completions(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        head = {"id": "chatcmpl-s", "model": "m", "object": "chat.completion.chunk"}
        yield {
            **head,
            "prompt_token_ids": [1],
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "par"}, "token_ids": [7]}],
        }
        if "break" in request["messages"][-1]["content"]:
            raise RuntimeError("sampler crashed")
        yield {
            **head,
            "choices": [
                {"index": 0, "delta": {"content": "tial"}, "token_ids": [8], "finish_reason": "stop"}
            ],
        }


@pytest.mark.parametrize("streaming_backend", [True, False])
async def test_in_process_and_non_streaming_backends_serve_translated_streams(
    store: InMemoryLightningStore, rollout: Rollout, streaming_backend: bool
) -> None:
    async with FakeOpenAIServer() as fake:
        backends = {"m": _Sampler(), "h": {"url": fake.base_url, "streaming": streaming_backend}}
        async with LLMProxy(backends, store=store) as proxy:
            url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id, model="m").endpoint
            client = anthropic.AsyncAnthropic(base_url=url.removesuffix("/v1"), api_key="x")
            async with client.messages.stream(
                model="m", max_tokens=9, messages=[{"role": "user", "content": "hi"}]
            ) as s:
                assert (await s.get_final_message()).content[0].text == "partial"  # type: ignore[union-attr]
            async with client.messages.stream(
                model="h", max_tokens=9, messages=[{"role": "user", "content": "via http"}]
            ) as s:
                assert (await s.get_final_message()).content[0].text == "via http"  # type: ignore[union-attr]
            with pytest.raises(anthropic.APIStatusError, match="sampler crashed"):
                async with client.messages.stream(
                    model="m", max_tokens=9, messages=[{"role": "user", "content": "break"}]
                ) as s:
                    await s.get_final_message()
            oai = openai.AsyncOpenAI(base_url=url, api_key="x")
            answer = await oai.responses.create(model="m", input="local")
            assert answer.output_text == "local"
            await client.close()
            await oai.close()
            assert await proxy.flush(timeout=10)
    spans = list(await store.query_spans(rollout.rollout_id))
    assert len(spans) == 4
    by_backend = {s.attributes["agl.llm.backend"]: s for s in spans if s.status.status_code == "OK"}
    assert any(s.attributes.get("response_token_ids") == [7, 8] for s in spans)
    assert by_backend
    failed = [s for s in spans if s.status.status_code == "ERROR"]
    assert len(failed) == 1 and "sampler crashed" in (failed[0].status.description or "")


@pytest.mark.parametrize("route", ["/responses", "/messages"])
async def test_a_backend_dying_mid_stream_ends_the_translated_stream_with_an_error_event(
    store: InMemoryLightningStore, rollout: Rollout, route: str
) -> None:
    async def crashing_stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        chunk = {
            "id": "s1",
            "object": "chat.completion.chunk",
            "model": "m",
            "prompt_token_ids": [1, 2],
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "par"}, "token_ids": [7]}],
        }
        await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await response.write(b'data: {"id": "s1", "choi')  # the model server dies mid-event
        assert request.transport is not None
        request.transport.abort()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", crashing_stream)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    body: dict[str, Any] = {"model": "m", "stream": True}
    if route == "/responses":
        body["input"] = "x"
    else:
        body.update(max_tokens=5, messages=[{"role": "user", "content": "x"}])
    try:
        async with (
            LLMProxy({"m": f"http://127.0.0.1:{runner.addresses[0][1]}/v1"}, store=store) as proxy,
            aiohttp.ClientSession() as http,
        ):
            url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint + route
            async with http.post(url, json=body) as response:
                assert response.status == 200
                text = await response.text()
            assert await proxy.flush(timeout=10)
    finally:
        await runner.cleanup()
    kinds = [line.removeprefix("event: ") for line in text.splitlines() if line.startswith("event: ")]
    if route == "/responses":
        assert "response.output_text.delta" in kinds and kinds[-2:] == ["error", "response.failed"]
    else:
        assert "content_block_delta" in kinds and kinds[-1] == "error"
    [span] = await store.query_spans(rollout.rollout_id)
    assert span.status.status_code == "ERROR" and "broke off" in (span.status.description or "")
    assert span.attributes["response_token_ids"] == [7] and span.attributes["prompt_token_ids"] == [1, 2]
