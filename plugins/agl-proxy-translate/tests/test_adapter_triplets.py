"""Agents on the Responses and Messages APIs through the proxy: the same triplets, token ids exact."""

from __future__ import annotations

from typing import Any

from agl_core.adapter.proxy_triplet import LlmProxyTraceToTriplet
from agl_core.emitter import emit_reward
from agl_core.llm_proxy import LLMProxy
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import Span
from agl_testing.fake_openai import FakeOpenAIServer, FakeTokenizer, Reply, ToolCall


def weather_model(request: dict[str, Any]) -> Reply:
    """Calls the tool first; once the tool answered, reports the result."""
    last = request["messages"][-1]
    if last["role"] == "tool":
        return Reply(content=f"The weather in Paris is {last['content']}.")
    return Reply(content="Checking.", tool_calls=[ToolCall("get_weather", {"city": "Paris"})])


async def test_agents_on_the_responses_and_messages_apis_yield_the_same_triplets() -> None:
    """One tool-using conversation through /responses (streamed) and /messages: triplets with exact ids."""
    import anthropic
    import openai

    store = InMemoryLightningStore()
    tokenizer = FakeTokenizer()
    async with (
        FakeOpenAIServer(script=weather_model) as backend,
        LLMProxy({"policy": backend.base_url}, store=store) as proxy,
    ):
        for api in ("responses", "messages"):
            rollout = await store.start_rollout(input={"api": api})
            rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
            endpoint = proxy.as_resource(rid, aid).endpoint
            if api == "responses":
                client = openai.AsyncOpenAI(base_url=endpoint, api_key="x")
                tool = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
                history: list[Any] = [{"role": "user", "content": "What's the weather in Paris?"}]
                first = await client.responses.create(
                    model="policy", instructions="Weather bot.", input=history, tools=[tool]
                )
                history += [item.model_dump(exclude_none=True) for item in first.output]
                history += [
                    {"type": "function_call_output", "call_id": i.call_id, "output": "sunny"}
                    for i in first.output
                    if i.type == "function_call"
                ]
                async with client.responses.stream(
                    model="policy", instructions="Weather bot.", input=history, tools=[tool]
                ) as stream:
                    final = await stream.get_final_response()
                assert final.output_text == "The weather in Paris is sunny."
            else:
                aclient = anthropic.AsyncAnthropic(base_url=endpoint.removesuffix("/v1"), api_key="x")
                atool = {"name": "get_weather", "input_schema": {"type": "object"}}
                turns: list[Any] = [{"role": "user", "content": "What's the weather in Paris?"}]
                reply = await aclient.messages.create(
                    model="policy", max_tokens=99, system="Weather bot.", messages=turns, tools=[atool]
                )
                uses = [b for b in reply.content if b.type == "tool_use"]
                turns += [
                    {"role": "assistant", "content": [b.model_dump() for b in reply.content]},
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": u.id, "content": "sunny"} for u in uses
                        ],
                    },
                ]
                async with aclient.messages.stream(
                    model="policy", max_tokens=99, system="Weather bot.", messages=turns, tools=[atool]
                ) as astream:
                    message = await astream.get_final_message()
                assert message.content[0].text == "The weather in Paris is sunny."  # type: ignore[union-attr]
            reward = Span.from_core_fields(
                emit_reward(1.0, propagate=False),
                rollout_id=rid,
                attempt_id=aid,
                sequence_id=await store.get_next_span_sequence_id(rid, aid),
            )
            await store.add_span(reward)
            assert await proxy.flush(timeout=10)
            triplets = LlmProxyTraceToTriplet().adapt(list(await store.query_spans(rid)))
            assert len(triplets) == 2 and [t.reward for t in triplets] == [None, 1.0]
            assert triplets[1].response["token_ids"] == tokenizer.encode("The weather in Paris is sunny.")
            first_response = triplets[0].response["token_ids"]
            second_prompt = triplets[1].prompt["token_ids"]
            assert any(
                second_prompt[i : i + len(first_response)] == first_response
                for i in range(len(second_prompt))
            ), api
