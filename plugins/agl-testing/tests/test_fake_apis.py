"""The fake server's Responses and Anthropic Messages endpoints, parsed by the official SDKs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anthropic
import openai
import pytest

from agl_testing.fake_openai import FakeOpenAIServer, Fault, Reply, Rule, ToolCall

WEATHER_TOOL_RESPONSES = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
WEATHER_TOOL_ANTHROPIC = {
    "name": "get_weather",
    "description": "Weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(token_ids="always") as server:
        yield server


async def test_responses_text_and_tool_calls_parse_with_the_openai_sdk(fake: FakeOpenAIServer) -> None:
    fake.rules.append(
        Rule(
            "weather",
            Reply(
                tool_calls=[
                    ToolCall("get_weather", {"city": "Paris"}),
                    ToolCall("get_weather", {"city": "Oslo"}),
                ]
            ),
        )
    )
    client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="x")
    text = await client.responses.create(model="m", input="hello there", instructions="Be brief.")
    assert text.output_text == "hello there" and text.status == "completed"
    assert text.usage is not None and text.usage.output_tokens == len(fake.tokenizer.encode("hello there"))
    extra = text.model_extra or {}
    assert extra["token_ids"] == fake.tokenizer.encode("hello there")
    assert fake.tokenizer.decode(extra["prompt_token_ids"]).startswith("<|im_start|>system\nBe brief.")
    calls = await client.responses.create(model="m", input="weather?", tools=[WEATHER_TOOL_RESPONSES])
    items = [item for item in calls.output if item.type == "function_call"]
    assert [json.loads(item.arguments) for item in items] == [{"city": "Paris"}, {"city": "Oslo"}]
    follow = await client.responses.create(
        model="m",
        input=[
            {"role": "user", "content": "weather?"},
            *[
                {"type": "function_call", "call_id": i.call_id, "name": i.name, "arguments": i.arguments}
                for i in items
            ],
            *[{"type": "function_call_output", "call_id": i.call_id, "output": "sunny"} for i in items],
            {"role": "user", "content": [{"type": "input_text", "text": "thanks"}]},
        ],
    )
    assert follow.output_text == "thanks"
    await client.close()


async def test_responses_stream_events_parse_with_the_openai_sdk(fake: FakeOpenAIServer) -> None:
    client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="x")
    stream = await client.responses.create(model="m", input="one two three", stream=True)
    kinds, deltas, final = [], [], None
    async for event in stream:
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
        if event.type == "response.completed":
            final = event.response
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "".join(deltas) == "one two three"
    assert final is not None and final.output_text == "one two three"
    async with client.responses.stream(model="m", input="hi") as managed:
        done = await managed.get_final_response()
    assert done.output_text == "hi"
    await client.close()


async def test_messages_text_tools_and_stream_parse_with_the_anthropic_sdk(fake: FakeOpenAIServer) -> None:
    fake.rules.append(Rule("weather", Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"})])))
    client = anthropic.AsyncAnthropic(base_url=fake.base_url.removesuffix("/v1"), api_key="x")
    message = await client.messages.create(
        model="m", max_tokens=64, system="Be brief.", messages=[{"role": "user", "content": "hi you"}]
    )
    assert message.content[0].type == "text" and message.content[0].text == "hi you"
    assert message.stop_reason == "end_turn" and message.usage.output_tokens == 3
    tool = await client.messages.create(
        model="m",
        max_tokens=64,
        tools=[WEATHER_TOOL_ANTHROPIC],
        messages=[{"role": "user", "content": "weather?"}],
    )
    assert tool.stop_reason == "tool_use"
    [use] = [block for block in tool.content if block.type == "tool_use"]
    assert use.input == {"city": "Paris"} and use.id.startswith("toolu_")
    async with client.messages.stream(
        model="m",
        max_tokens=64,
        messages=[
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": [use.model_dump()]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": use.id, "content": "sunny"},
                    {"type": "text", "text": "ok then"},
                ],
            },
        ],
    ) as stream:
        final = await stream.get_final_message()
    assert final.content[0].text == "ok then" and final.stop_reason == "end_turn"
    with pytest.raises(anthropic.BadRequestError):
        await client.messages.create(model="m", max_tokens=0, messages=[{"role": "user", "content": "x"}])
    fake.fail_next(Fault(status=529, message="busy"))
    with pytest.raises(anthropic.APIStatusError) as caught:
        await client.with_options(max_retries=0).messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.status_code == 529
    await client.close()
