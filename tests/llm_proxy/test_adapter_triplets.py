"""Proxy records -> LlmProxyTraceToTriplet: triplets carry exactly the token ids the backend produced."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from agl_core.adapter.proxy_triplet import LlmProxyTraceToTriplet
from agl_core.emitter import emit_reward
from agl_core.llm_proxy import LLMProxy
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import Span
from agl_testing.fake_openai import FakeOpenAIServer, FakeTokenizer, Reply, ToolCall, render_chat_prompt
from tests.llm_proxy.conftest import sse_chunks

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def weather_model(request: dict[str, Any]) -> Reply:
    """Calls the tool first; once the tool answered, reports the result."""
    last = request["messages"][-1]
    if last["role"] == "tool":
        return Reply(content=f"The weather in Paris is {last['content']}.")
    return Reply(content="Checking.", tool_calls=[ToolCall("get_weather", {"city": "Paris"})])


async def run_agent(
    http: aiohttp.ClientSession, base_url: str
) -> list[tuple[list[dict[str, Any]], list[int]]]:
    """A two-turn tool-using agent speaking plain OpenAI.

    Returns (messages sent, token ids received) per call.
    """
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "What's the weather in Paris?"},
    ]
    calls = []
    async with http.post(
        f"{base_url}/chat/completions", json={"model": "policy", "messages": messages, "tools": TOOLS}
    ) as r:
        first = await r.json()
    calls.append(([dict(m) for m in messages], first["choices"][0]["token_ids"]))
    assistant = first["choices"][0]["message"]
    messages.append(assistant)
    for call in assistant["tool_calls"]:
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "sunny"})
    body = {"model": "policy", "messages": messages, "tools": TOOLS, "stream": True}
    async with http.post(f"{base_url}/chat/completions", json=body) as r:
        chunks = sse_chunks(await r.text())
    streamed = [t for c in chunks for choice in c["choices"] for t in choice.get("token_ids", [])]
    calls.append(([dict(m) for m in messages], streamed))
    return calls


async def test_multi_turn_agent_yields_triplets_with_the_backends_exact_token_ids(
    http: aiohttp.ClientSession,
) -> None:
    store = InMemoryLightningStore()
    rollout = await store.start_rollout(input={"city": "Paris"})
    rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
    async with (
        FakeOpenAIServer(script=weather_model) as backend,
        LLMProxy({"policy": backend.base_url}, store=store) as proxy,
    ):
        calls = await run_agent(http, proxy.as_resource(rid, aid).endpoint)
        # the agent's tracer reports the reward after the last call: a later sequence id
        reward = Span.from_core_fields(
            emit_reward(1.0, propagate=False),
            rollout_id=rid,
            attempt_id=aid,
            sequence_id=await store.get_next_span_sequence_id(rid, aid),
        )
        await store.add_span(reward)
        assert await proxy.flush(timeout=10)
    spans = list(await store.query_spans(rid))

    triplets = LlmProxyTraceToTriplet().adapt(spans)

    tokenizer = FakeTokenizer()
    assert len(triplets) == 2
    for triplet, (messages, received_ids) in zip(triplets, calls, strict=True):
        # prompt ids: what the model server tokenized; response ids: what the agent received
        assert triplet.prompt["token_ids"] == tokenizer.encode(render_chat_prompt(messages, TOOLS))
        assert triplet.response["token_ids"] == received_ids
        assert len(triplet.response["logprobs"]) == len(received_ids)
    assert triplets[1].response["token_ids"] == tokenizer.encode("The weather in Paris is sunny.")
    # the second prompt contains the first response's ids verbatim: no retokenization anywhere
    first_response = triplets[0].response["token_ids"]
    second_prompt = triplets[1].prompt["token_ids"]
    assert any(
        second_prompt[i : i + len(first_response)] == first_response for i in range(len(second_prompt))
    )
    assert [t.reward for t in triplets] == [None, 1.0]
    assert (
        json.loads(spans[1].attributes["gen_ai.input.messages"])[-1]["parts"][0]["type"]
        == "tool_call_response"
    )
