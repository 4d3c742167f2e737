"""FakeOpenAIServer driven by the real ``openai`` client (sync on a thread, async in the loop)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

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

MESSAGES: list[Any] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say hello, world!"},
]
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
IDS = {"return_token_ids": True}


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(
        rules=[Rule("weather", Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"}, id="call_w")]))]
    ) as srv:
        yield srv


@pytest.fixture
def client(server: FakeOpenAIServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)


def test_tokenizer_is_deterministic_and_reversible() -> None:
    tok = FakeTokenizer()
    text = "<|im_start|>user\nHello, wörld  42!<|im_end|>"
    ids = tok.encode(text)
    assert ids == FakeTokenizer().encode(text)
    assert ids[0] == 1 and ids[-1] == 2
    assert tok.decode(ids) == text
    assert tok.pieces("a  b,c") == ["a", "  ", "b", ",", "c"]
    with pytest.raises(KeyError):
        FakeTokenizer().decode([ids[1]])


def test_chat_echo_with_token_ids_and_usage(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    resp = client.chat.completions.create(model="qwen", messages=MESSAGES, extra_body=IDS)
    tok = server.tokenizer
    choice = resp.choices[0]
    assert choice.message.content == "Say hello, world!"
    assert choice.finish_reason == "stop"
    extra = resp.model_extra or {}
    assert extra["prompt_token_ids"] == tok.encode(render_chat_prompt(MESSAGES))
    token_ids = (choice.model_extra or {})["token_ids"]
    assert tok.decode(token_ids) == "Say hello, world!"
    assert resp.usage is not None
    assert resp.usage.prompt_tokens == len(extra["prompt_token_ids"])
    assert resp.usage.completion_tokens == len(token_ids) == 7  # Say,  , hello, ",",  , world, !
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + 7
    assert resp.id.startswith("chatcmpl-fake-") and resp.model == "qwen"


def test_token_ids_only_when_requested_or_forced(client: openai.OpenAI) -> None:
    plain = client.chat.completions.create(model="m", messages=MESSAGES)
    assert "prompt_token_ids" not in (plain.model_extra or {})
    assert "token_ids" not in (plain.choices[0].model_extra or {})
    with FakeOpenAIServer(token_ids="always") as always:
        forced = openai.OpenAI(base_url=always.base_url, api_key="k").chat.completions.create(
            model="m", messages=MESSAGES
        )
    assert (forced.model_extra or {})["prompt_token_ids"]
    with FakeOpenAIServer(token_ids="never") as never:
        off = openai.OpenAI(base_url=never.base_url, api_key="k").chat.completions.create(
            model="m", messages=MESSAGES, extra_body=IDS
        )
    assert "prompt_token_ids" not in (off.model_extra or {})


def test_logprobs_align_with_token_ids(client: openai.OpenAI) -> None:
    resp = client.chat.completions.create(
        model="m", messages=MESSAGES, logprobs=True, top_logprobs=3, extra_body=IDS
    )
    choice = resp.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content is not None
    entries = choice.logprobs.content
    token_ids = (choice.model_extra or {})["token_ids"]
    assert len(entries) == len(token_ids)
    assert "".join(e.token for e in entries) == "Say hello, world!"
    for entry in entries:
        assert entry.logprob < 0
        assert entry.bytes == list(entry.token.encode())
        assert len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].token == entry.token
        assert entry.top_logprobs[1].logprob < entry.logprob
    no_lp = client.chat.completions.create(model="m", messages=MESSAGES)
    assert no_lp.choices[0].logprobs is None


def test_rule_answers_with_scripted_tool_call(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    resp = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "weather in Paris?"}], tools=TOOLS, extra_body=IDS
    )
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = [c for c in choice.message.tool_calls or [] if c.type == "function"]
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("call_w", "get_weather", {"city": "Paris"})
    ]
    token_ids = (choice.model_extra or {})["token_ids"]
    assert server.tokenizer.decode(token_ids) == render_reply(None, [("get_weather", '{"city": "Paris"}')])
    prompt = server.tokenizer.decode((resp.model_extra or {})["prompt_token_ids"])
    assert prompt.startswith("<|im_start|>system\n# Tools\n") and "get_weather" in prompt


def test_list_script_is_consumed_in_order_then_reports_exhaustion() -> None:
    with FakeOpenAIServer(["first", Reply(content="second", finish_reason="length")]) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="k", max_retries=0)
        got = [client.chat.completions.create(model="m", messages=MESSAGES).choices[0] for _ in range(2)]
        assert [(c.message.content, c.finish_reason) for c in got] == [
            ("first", "stop"),
            ("second", "length"),
        ]
        with pytest.raises(openai.InternalServerError, match="script exhausted: 2 replies were scripted"):
            client.chat.completions.create(model="m", messages=MESSAGES)


def test_callable_script_sees_the_request_and_n_choices() -> None:
    seen: list[dict[str, Any]] = []

    def script(request: dict[str, Any]) -> Reply:
        seen.append(request)
        return Reply(content=f"answer {len(seen)} to {request['model']}")

    with FakeOpenAIServer(script) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="k")
        resp = client.chat.completions.create(model="m1", messages=MESSAGES, n=2, extra_body=IDS)
    assert [c.message.content for c in resp.choices] == ["answer 1 to m1", "answer 2 to m1"]
    assert [c.index for c in resp.choices] == [0, 1]
    assert seen[0]["messages"] == MESSAGES
    assert resp.usage is not None
    assert resp.usage.completion_tokens == sum(len((c.model_extra or {})["token_ids"]) for c in resp.choices)


def test_max_tokens_truncates_and_reports_length(client: openai.OpenAI) -> None:
    resp = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=3)
    assert resp.choices[0].message.content == "Say hello"
    assert resp.choices[0].finish_reason == "length"
    assert resp.usage is not None and resp.usage.completion_tokens == 3


def test_streaming_chat_matches_non_streaming(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    full = client.chat.completions.create(model="m", messages=MESSAGES, extra_body=IDS, logprobs=True)
    chunks = list(
        client.chat.completions.create(
            model="m",
            messages=MESSAGES,
            stream=True,
            logprobs=True,
            stream_options={"include_usage": True},
            extra_body=IDS,
        )
    )
    assert (chunks[0].model_extra or {})["prompt_token_ids"] == (full.model_extra or {})["prompt_token_ids"]
    assert all("prompt_token_ids" not in (c.model_extra or {}) for c in chunks[1:])
    assert chunks[0].choices[0].delta.role == "assistant"
    body = [c for c in chunks if c.choices]
    assert "".join(c.choices[0].delta.content or "" for c in body) == full.choices[0].message.content
    streamed_ids = [t for c in body for t in (c.choices[0].model_extra or {})["token_ids"]]
    assert streamed_ids == (full.choices[0].model_extra or {})["token_ids"]
    streamed_lp = [
        e.token for c in body if c.choices[0].logprobs for e in c.choices[0].logprobs.content or []
    ]
    assert "".join(streamed_lp) == full.choices[0].message.content
    assert body[-1].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage == full.usage
    assert len({c.id for c in chunks}) == 1


def test_streaming_tool_call(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "weather?"}],
            tools=TOOLS,
            stream=True,
            extra_body=IDS,
        )
    )
    calls = [call for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or []]
    assert len(calls) == 1
    assert calls[0].id == "call_w" and calls[0].function is not None
    assert (calls[0].function.name, calls[0].function.arguments) == ("get_weather", '{"city": "Paris"}')
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert chunks[-1].usage is None


async def test_async_client_streaming_and_image_prompt() -> None:
    async with FakeOpenAIServer(["a picture of a cat"]) as srv:
        client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="k")
        messages: list[Any] = [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
            }
        ]
        stream = await client.chat.completions.create(
            model="m", messages=messages, stream=True, extra_body=IDS
        )
        chunks = [chunk async for chunk in stream]
        await client.close()
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "a picture of a cat"
    prompt_ids = (chunks[0].model_extra or {})["prompt_token_ids"]
    assert 3 in prompt_ids  # the <image> token
    assert (
        srv.tokenizer.decode(prompt_ids)
        == "<|im_start|>user\nWhat is this?<image><|im_end|>\n<|im_start|>assistant\n"
    )
    assert srv.requests[0].body["messages"] == messages


def test_text_completions_with_ids_and_logprobs(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    resp = client.completions.create(model="m", prompt="one two", logprobs=2, extra_body=IDS)
    choice = resp.choices[0]
    extra = choice.model_extra or {}
    assert choice.text == "one two" and choice.finish_reason == "stop"
    assert extra["prompt_token_ids"] == server.tokenizer.encode("one two") == extra["token_ids"]
    assert choice.logprobs is not None
    assert choice.logprobs.tokens == ["one", " ", "two"]
    assert choice.logprobs.text_offset == [0, 3, 4]
    assert choice.logprobs.top_logprobs is not None and len(choice.logprobs.top_logprobs[0]) == 2
    assert resp.usage is not None and (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (3, 3)
    by_ids = client.completions.create(model="m", prompt=extra["prompt_token_ids"])
    assert by_ids.choices[0].text == "one two"


def test_text_completions_streaming(client: openai.OpenAI) -> None:
    chunks = list(client.completions.create(model="m", prompt="a b", stream=True, extra_body=IDS))
    assert "".join(c.choices[0].text for c in chunks) == "a b"
    assert (chunks[0].choices[0].model_extra or {})["prompt_token_ids"]
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_faults_http_status_and_dropped_connection(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    server.fail_next(Fault(status=429, message="slow down"), Fault(drop_connection=True))
    with pytest.raises(openai.RateLimitError, match="slow down"):
        client.chat.completions.create(model="m", messages=MESSAGES)
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="m", messages=MESSAGES)
    assert client.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content
    assert len(server.requests) == 3


def test_fault_as_script_item_and_retry_recovers() -> None:
    with FakeOpenAIServer([Fault(status=503), "recovered"]) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="k", max_retries=1)
        resp = client.chat.completions.create(model="m", messages=MESSAGES)
    assert resp.choices[0].message.content == "recovered"
    assert len(srv.requests) == 2


def test_bad_requests_get_400_naming_the_problem(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="'messages' must be a non-empty list"):
        client.chat.completions.create(model="m", messages=[])
    with pytest.raises(openai.BadRequestError, match="'top_logprobs' must be an integer"):
        client.chat.completions.create(model="m", messages=MESSAGES, logprobs=True, top_logprobs=99)
    with pytest.raises(openai.BadRequestError, match="'prompt' must be"):
        client.completions.create(model="m", prompt=[])


def test_requests_are_recorded_and_models_listed(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    client.chat.completions.create(model="m", messages=MESSAGES, temperature=0.5)
    assert [m.id for m in client.models.list()] == ["fake-model"]
    first, second = server.requests
    assert (first.method, first.path) == ("POST", "/v1/chat/completions")
    assert first.body["temperature"] == 0.5 and first.headers["Authorization"] == "Bearer sk-test"
    assert (second.method, second.path) == ("GET", "/v1/models")


async def test_lifecycle_ports_and_errors() -> None:
    srv = FakeOpenAIServer()
    with pytest.raises(RuntimeError, match="not running"):
        _ = srv.base_url
    async with srv, FakeOpenAIServer() as other:
        assert srv.base_url.endswith("/v1") and srv.port != other.port
        with pytest.raises(RuntimeError, match="already running"):
            await srv.start()
    with pytest.raises(RuntimeError, match="not running"):
        _ = srv.port
    with pytest.raises(ValueError, match="token_ids must be"):
        FakeOpenAIServer(token_ids="sometimes")  # type: ignore[arg-type]
