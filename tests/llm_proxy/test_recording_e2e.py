"""End to end: what the proxy records equals what the backend sent, token for token."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from agl_core.llm_proxy import SPAN_NAME, LLMProxy
from agl_core.store.memory import InMemoryLightningStore
from agl_testing.fake_openai import (
    FakeOpenAIServer,
    FakeTokenizer,
    Reply,
    Rule,
    ToolCall,
    render_chat_prompt,
    render_reply,
)
from tests.llm_proxy.conftest import Rollout, chat, sse_chunks

WEATHER_CALL = Reply(
    content="Let me check.", tool_calls=[ToolCall("get_weather", {"city": "Paris"}, id="call_w")]
)
RULES = [Rule(when="weather", reply=WEATHER_CALL)]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


async def _spans(store: InMemoryLightningStore, proxy: LLMProxy, rollout_id: str) -> list:
    assert await proxy.flush(timeout=10)
    return list(await store.query_spans(rollout_id))


async def test_non_streaming_chat_records_backend_ids_and_logprobs_exactly(
    proxy: LLMProxy, store: InMemoryLightningStore, rollout: Rollout, http: aiohttp.ClientSession
) -> None:
    url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint + "/chat/completions"
    body = chat("hello proxy world", temperature=0.5, max_tokens=50, seed=7)
    async with http.post(url, json=body) as response:
        assert response.status == 200
        answer = await response.json()

    [span] = await _spans(store, proxy, rollout.rollout_id)
    attrs = span.attributes
    assert span.name == SPAN_NAME
    assert (span.rollout_id, span.attempt_id) == (rollout.rollout_id, rollout.attempt_id)
    assert span.status.status_code == "OK"
    # exactly what the backend sent (the agent got the backend's body unchanged) ...
    assert attrs["prompt_token_ids"] == answer["prompt_token_ids"]
    assert attrs["response_token_ids"] == answer["choices"][0]["token_ids"]
    assert json.loads(attrs["logprobs.content"]) == answer["choices"][0]["logprobs"]["content"]
    # ... and what the model server actually computed, independently of the proxy
    tokenizer = FakeTokenizer()
    assert attrs["prompt_token_ids"] == tokenizer.encode(render_chat_prompt(body["messages"]))
    assert attrs["response_token_ids"] == tokenizer.encode("hello proxy world")
    assert attrs["gen_ai.response.id"] == answer["id"]
    assert attrs["gen_ai.request.model"] == "m"
    assert attrs["gen_ai.request.temperature"] == 0.5
    assert attrs["gen_ai.request.max_tokens"] == 50
    assert attrs["gen_ai.request.seed"] == 7
    assert attrs["gen_ai.usage.input_tokens"] == answer["usage"]["prompt_tokens"]
    assert attrs["gen_ai.usage.output_tokens"] == answer["usage"]["completion_tokens"]
    assert attrs["gen_ai.response.finish_reasons"] == ["stop"]
    assert attrs["agl.llm.source"] == "proxy"
    assert attrs["agl.llm.stream"] is False
    assert attrs["agl.llm.latency_ms"] > 0
    assert json.loads(attrs["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "hello proxy world"}]}
    ]
    assert json.loads(attrs["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "hello proxy world"}],
            "finish_reason": "stop",
        }
    ]


async def test_proxy_asks_vllm_backends_for_token_ids_and_logprobs_but_respects_the_agent(
    proxy: LLMProxy,
    rollout: Rollout,
    backend_a: FakeOpenAIServer,
    backend_b: FakeOpenAIServer,
    http: aiohttp.ClientSession,
) -> None:
    url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint + "/chat/completions"
    for body in (chat("one"), chat("two", logprobs=True, top_logprobs=3)):
        async with http.post(url, json=body) as response:
            assert response.status == 200
    received = [r.body for r in backend_a.requests + backend_b.requests]
    assert len(received) == 2
    plain = next(b for b in received if b["messages"][0]["content"] == "one")
    own = next(b for b in received if b["messages"][0]["content"] == "two")
    assert plain["return_token_ids"] is True and plain["logprobs"] is True
    assert own["top_logprobs"] == 3 and own["logprobs"] is True


async def test_streaming_chat_with_tool_calls_records_the_assembled_stream(
    store: InMemoryLightningStore, rollout: Rollout, http: aiohttp.ClientSession
) -> None:
    async with (
        FakeOpenAIServer(rules=RULES) as backend,
        LLMProxy({"m": backend.base_url}, store=store) as proxy,
    ):
        url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint + "/chat/completions"
        body = chat("what is the weather in Paris?", tools=TOOLS, stream=True)
        async with http.post(url, json=body) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/event-stream")
            text = await response.text()
        assert text.rstrip().endswith("data: [DONE]")
        chunks = sse_chunks(text)
        assert len(chunks) > 3  # passed through chunk by chunk, not collapsed
        [span] = await _spans(store, proxy, rollout.rollout_id)

    attrs = span.attributes
    streamed_ids = [t for c in chunks for choice in c["choices"] for t in choice.get("token_ids", [])]
    streamed_logprobs = [
        entry
        for c in chunks
        for choice in c["choices"]
        for entry in (choice.get("logprobs") or {}).get("content", [])
    ]
    assert attrs["agl.llm.stream"] is True
    assert attrs["prompt_token_ids"] == chunks[0]["prompt_token_ids"]
    assert attrs["response_token_ids"] == streamed_ids
    assert json.loads(attrs["logprobs.content"]) == streamed_logprobs
    tokenizer = FakeTokenizer()
    expected = render_reply("Let me check.", [("get_weather", json.dumps({"city": "Paris"}))])
    assert attrs["response_token_ids"] == tokenizer.encode(expected)
    assert attrs["prompt_token_ids"] == tokenizer.encode(render_chat_prompt(body["messages"], TOOLS))
    assert attrs["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert json.loads(attrs["gen_ai.request.tools"]) == TOOLS
    [output] = json.loads(attrs["gen_ai.output.messages"])
    assert output["parts"] == [
        {"type": "text", "content": "Let me check."},
        {"type": "tool_call", "id": "call_w", "name": "get_weather", "arguments": '{"city": "Paris"}'},
    ]


@pytest.mark.parametrize("stream", [False, True])
async def test_text_completions_record_ids_and_legacy_logprobs(
    proxy: LLMProxy,
    store: InMemoryLightningStore,
    rollout: Rollout,
    http: aiohttp.ClientSession,
    stream: bool,
) -> None:
    url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint + "/completions"
    async with http.post(
        url, json={"model": "m", "prompt": "count one two three", "stream": stream}
    ) as response:
        assert response.status == 200
        raw = await response.text()
    [span] = await _spans(store, proxy, rollout.rollout_id)
    attrs = span.attributes
    tokenizer = FakeTokenizer()
    assert attrs["gen_ai.operation.name"] == "text_completion"
    assert attrs["prompt_token_ids"] == tokenizer.encode("count one two three")
    if stream:
        chunks = sse_chunks(raw)
        ids = [t for c in chunks for choice in c["choices"] for t in choice.get("token_ids", [])]
        tokens = [
            t
            for c in chunks
            for choice in c["choices"]
            for t in (choice.get("logprobs") or {}).get("tokens", [])
        ]
    else:
        answer = json.loads(raw)
        ids = answer["choices"][0]["token_ids"]
        tokens = answer["choices"][0]["logprobs"]["tokens"]
    assert attrs["response_token_ids"] == ids == tokenizer.encode("count one two three")
    assert json.loads(attrs["logprobs.content"])["tokens"] == tokens


async def test_spans_land_on_their_own_rollout_and_attempt_under_concurrency(
    proxy: LLMProxy, store: InMemoryLightningStore, http: aiohttp.ClientSession
) -> None:
    first = await store.start_rollout(input=1)
    retry = await store.start_attempt(first.rollout_id)
    second = await store.start_rollout(input=2)
    targets = [
        (first.rollout_id, first.attempt.attempt_id),
        (first.rollout_id, retry.attempt.attempt_id),
        (second.rollout_id, second.attempt.attempt_id),
    ]

    async def call(rollout_id: str, attempt_id: str, n: int) -> None:
        url = proxy.as_resource(rollout_id, attempt_id).endpoint + "/chat/completions"
        async with http.post(url, json=chat(f"{rollout_id} {attempt_id} {n}")) as response:
            assert response.status == 200

    await asyncio.gather(*(call(r, a, n) for n in range(10) for r, a in targets))
    assert await proxy.flush(timeout=10)
    for rollout_id in (first.rollout_id, second.rollout_id):
        spans = list(await store.query_spans(rollout_id))
        assert len(spans) == (20 if rollout_id == first.rollout_id else 10)
        assert sorted(s.sequence_id for s in spans) == list(range(1, len(spans) + 1))
        for span in spans:
            [message] = json.loads(span.attributes["gen_ai.input.messages"])
            owner_rollout, owner_attempt, _ = message["parts"][0]["content"].split()
            assert (span.rollout_id, span.attempt_id) == (owner_rollout, owner_attempt)
    assert proxy.stats()["spans_written"] == 30


async def test_requests_outside_a_rollout_path_are_proxied_but_not_recorded(
    proxy: LLMProxy, store: InMemoryLightningStore, rollout: Rollout, http: aiohttp.ClientSession
) -> None:
    for base in (proxy.endpoint, proxy.endpoint.removesuffix("/v1")):
        async with http.post(base + "/chat/completions", json=chat("anonymous")) as response:
            assert response.status == 200
            assert (await response.json())["choices"][0]["message"]["content"] == "anonymous"
    assert await proxy.flush(timeout=5)
    stats = proxy.stats()
    assert stats["requests_unrecorded"] == 2 and stats["spans_queued"] == 0
    assert (await store.statistics())["total_spans"] == 0


async def test_openai_sdk_talks_to_the_routed_resource(
    store: InMemoryLightningStore, rollout: Rollout
) -> None:
    openai = pytest.importorskip("openai")
    async with (
        FakeOpenAIServer(rules=RULES) as backend,
        LLMProxy({"m": backend.base_url}, store=store) as proxy,
    ):
        llm = proxy.as_resource(rollout.rollout_id, rollout.attempt_id)
        client = openai.AsyncOpenAI(base_url=llm.endpoint, api_key="unused", max_retries=0)
        try:
            completion = await client.chat.completions.create(
                model=llm.model, messages=[{"role": "user", "content": "weather please"}], tools=TOOLS
            )
            assert completion.choices[0].message.tool_calls[0].function.name == "get_weather"
            stream = await client.chat.completions.create(
                model=llm.model, messages=[{"role": "user", "content": "stream me"}], stream=True
            )
            text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])
            assert text == "stream me"
        finally:
            await client.close()
        spans = await _spans(store, proxy, rollout.rollout_id)
    assert [s.attributes["agl.llm.stream"] for s in spans] == [False, True]
    assert all(s.attributes["response_token_ids"] for s in spans)
    assert spans[1].attributes["response_token_ids"] == FakeTokenizer().encode("stream me")


async def test_backend_that_cannot_stream_gets_a_plain_request_and_the_agent_a_synthesized_stream(
    store: InMemoryLightningStore, rollout: Rollout, http: aiohttp.ClientSession
) -> None:
    from agl_core.llm_proxy import HttpBackend

    async with (
        FakeOpenAIServer(rules=RULES) as backend,
        LLMProxy({"m": HttpBackend(backend.base_url, streaming=False)}, store=store) as proxy,
    ):
        url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint + "/chat/completions"
        body = chat("weather?", stream=True, stream_options={"include_usage": True})
        async with http.post(url, json=body) as response:
            assert response.headers["Content-Type"].startswith("text/event-stream")
            chunks = sse_chunks(await response.text())
        [span] = await _spans(store, proxy, rollout.rollout_id)
    sent = backend.requests[0].body
    assert sent["stream"] is False and "stream_options" not in sent
    ids = [t for c in chunks for choice in c["choices"] for t in choice.get("token_ids", [])]
    calls = [
        call for c in chunks for choice in c["choices"] for call in choice["delta"].get("tool_calls", [])
    ]
    assert calls[0]["function"]["name"] == "get_weather" and calls[0]["id"] == "call_w"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == len(ids)
    assert span.attributes["response_token_ids"] == ids
    assert span.attributes["agl.llm.stream_synthesized"] is True
    assert span.attributes["prompt_token_ids"] == chunks[0]["prompt_token_ids"]


async def test_recording_into_a_remote_http_store(
    backend_a: FakeOpenAIServer, http: aiohttp.ClientSession
) -> None:
    from agl_core.store.http.client import LightningStoreClient
    from agl_core.store.http.server import LightningStoreServer

    backing = InMemoryLightningStore()
    server = LightningStoreServer(backing)
    await server.start()
    client = LightningStoreClient(server.endpoint)
    try:
        started = await client.start_rollout(input="remote")
        async with LLMProxy({"m": backend_a.base_url}, store=client) as proxy:
            url = (
                proxy.as_resource(started.rollout_id, started.attempt.attempt_id).endpoint
                + "/chat/completions"
            )

            async def call(n: int) -> list[int]:
                async with http.post(url, json=chat(f"remote {n}")) as response:
                    return (await response.json())["choices"][0]["token_ids"]

            received = await asyncio.gather(*(call(n) for n in range(30)))
            assert await proxy.flush(timeout=30)
            assert proxy.stats()["store_errors"] == 0
        spans = list(await backing.query_spans(started.rollout_id))
    finally:
        await client.close()
        await server.stop()
    assert sorted(s.sequence_id for s in spans) == list(range(1, 31))
    by_text = {json.loads(s.attributes["gen_ai.input.messages"])[0]["parts"][0]["content"]: s for s in spans}
    for n, ids in enumerate(received):
        assert by_text[f"remote {n}"].attributes["response_token_ids"] == ids
