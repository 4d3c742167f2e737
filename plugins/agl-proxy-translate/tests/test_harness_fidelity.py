"""What real agent harnesses send (Claude Code, the Codex CLI), translated, answered and recorded faithfully.

Request shapes are those the CLIs were seen sending (see examples/programs/clis for the CLIs themselves).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from click.testing import CliRunner
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from agl_core.adapter.doctor import diagnose_rollout
from agl_core.cli import build_cli
from agl_core.cli.proxy_cmd import parse_backend_options
from agl_core.llm_proxy import HttpBackend, LLMProxy
from agl_core.llm_proxy.recording import REFUSED, REQUEST_DROPPED, SIDE_CALL
from agl_core.llm_proxy.request_options import KNOWN_VOLATILE_LINES, RequestOptions
from agl_core.llm_proxy.streaming import iter_sse_data
from agl_core.store.memory import InMemoryLightningStore
from agl_proxy_translate.messages import messages_to_chat
from agl_proxy_translate.responses import ResponsesStream, chat_to_response, responses_to_chat
from agl_proxy_translate.translation import Translation
from agl_testing.fake_openai import FakeOpenAIServer, Reply
from tests.conftest import Rollout

RESPONSE_EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
SCHEMA = {"type": "object", "properties": {"cmd": {"type": "string"}}}
GRAMMAR = {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}
CODEX_TOOLS = {
    "type": "additional_tools",
    "role": "developer",
    "tools": [
        {
            "type": "namespace",
            "name": "functions",
            "tools": [
                {"type": "custom", "name": "exec", "description": "Run JavaScript", "format": GRAMMAR},
                {"type": "function", "name": "wait", "parameters": SCHEMA},
            ],
        }
    ],
}


def _claude_request(**extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-opus-5-5",
        "max_tokens": 128000,
        "system": [
            {
                "type": "text",
                "text": "x-anthropic-billing-header: cc_version=2.1.332.1c9; cc_entrypoint=sdk-cli;",
            },
            {"type": "text", "text": "You are a Claude agent.", "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Say hello"}]},
            {"role": "system", "content": [{"type": "text", "text": "# Environment\ncwd: /w"}]},
        ],
        "tools": [
            {"name": "Bash", "description": "Run", "input_schema": SCHEMA},
            {"name": "DeferredToolPlaceholder", "input_schema": SCHEMA, "defer_loading": True},
        ],
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": []},
        "output_config": {"effort": "medium"},
        "metadata": {"user_id": "u"},
        "stream": True,
        **extra,
    }


# ---------------------------------------------------------------------------------------------- Messages


def test_claude_codes_request_keeps_its_inner_system_message_and_lists_what_was_dropped() -> None:
    notes = Translation()
    chat = messages_to_chat(_claude_request(), notes)
    assert [m["role"] for m in chat["messages"]] == ["system", "user", "system"]
    assert chat["messages"][2]["content"] == "# Environment\ncwd: /w"
    assert [t["function"]["name"] for t in chat["tools"]] == ["Bash"]
    assert chat["max_tokens"] == 128000
    assert notes.dropped == [
        "tools[1]: DeferredToolPlaceholder (defer_loading)",
        "thinking",
        "context_management",
        "output_config.effort",
        "metadata",
    ]


def test_structured_output_becomes_a_json_schema_response_format() -> None:
    schema = {"type": "object", "properties": {"title": {"type": "string"}}}
    chat = messages_to_chat(
        {
            "model": "m",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "x"}],
            "output_config": {"format": {"type": "json_schema", "schema": schema}},
        }
    )
    assert chat["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema},
    }


# ---------------------------------------------------------------------------------------------- Responses


def _codex_request(*items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-6.2-sol",
        "input": [CODEX_TOOLS, {"type": "message", "role": "user", "content": "hi"}, *items],
        "tools": [{"type": "web_search"}],
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "reasoning": {"effort": "low", "summary": "auto"},
        "text": {"verbosity": "low"},
        "prompt_cache_key": "s",
        **extra,
    }


def test_codexs_namespaced_custom_and_hosted_tools_become_chat_functions() -> None:
    notes = Translation()
    chat = responses_to_chat(_codex_request(), notes)
    functions = {t["function"]["name"]: t["function"] for t in chat["tools"]}
    assert set(functions) == {"functions__exec", "functions__wait"}
    assert functions["functions__wait"]["parameters"] == SCHEMA
    exec_tool = functions["functions__exec"]
    assert exec_tool["parameters"]["required"] == ["input"]
    assert "start: /.+/" in exec_tool["description"]
    assert chat["reasoning_effort"] == "low"
    assert notes.dropped[0].startswith("tools[0]: hosted tool 'web_search'")
    assert notes.dropped[1:] == [
        "store",
        "include: reasoning.encrypted_content",
        "text.verbosity",
        "prompt_cache_key",
        "reasoning.summary",
    ]


def test_earlier_custom_and_namespaced_calls_come_back_as_flat_function_calls() -> None:
    chat = responses_to_chat(
        _codex_request(
            {
                "type": "custom_tool_call",
                "call_id": "c1",
                "name": "exec",
                "namespace": "functions",
                "input": "1+1",
            },
            {
                "type": "custom_tool_call_output",
                "call_id": "c1",
                "output": [{"type": "input_text", "text": "2"}],
            },
            {
                "type": "function_call",
                "call_id": "c2",
                "name": "wait",
                "namespace": "functions",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "c2", "output": "done"},
        )
    )
    turns = chat["messages"][-4:]
    assert turns[0]["tool_calls"][0]["function"] == {
        "name": "functions__exec",
        "arguments": '{"input":"1+1"}',
    }
    assert turns[1] == {"role": "tool", "tool_call_id": "c1", "content": "2"}
    assert turns[2]["tool_calls"][0]["function"] == {"name": "functions__wait", "arguments": "{}"}
    assert turns[3] == {"role": "tool", "tool_call_id": "c2", "content": "done"}


def _chat_answer(name: str, arguments: str) -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {
        "id": "chatcmpl-1",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }


def test_answers_map_calls_back_to_the_declared_custom_and_namespaced_tools() -> None:
    notes = Translation()
    request = _codex_request()
    responses_to_chat(request, notes)
    custom = chat_to_response(_chat_answer("functions__exec", '{"input": "text(1)"}'), request, notes)
    Response.model_validate(custom)
    assert custom["output"][0] | {"id": None} == {
        "id": None,
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": "call_1",
        "name": "exec",
        "input": "text(1)",
        "namespace": "functions",
    }
    plain = chat_to_response(_chat_answer("functions__wait", "{}"), request, notes)["output"][0]
    assert (plain["type"], plain["name"], plain["namespace"], plain["arguments"]) == (
        "function_call",
        "wait",
        "functions",
        "{}",
    )


def test_streamed_custom_call_arrives_whole_with_its_input() -> None:
    notes = Translation()
    request = _codex_request(stream=True)
    responses_to_chat(request, notes)
    stream = ResponsesStream(request, notes)
    pieces = ['{"input": "te', 'xt(1)"}']
    body = stream.feed({"id": "chatcmpl-1", "model": "m", "choices": []})
    for index, piece in enumerate(pieces):
        call = {"index": 0, "function": {"arguments": piece}}
        if index == 0:
            call |= {"id": "call_1", "function": {"name": "functions__exec", "arguments": piece}}
        body += stream.feed({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
    body += stream.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    body += stream.finish()
    events = [json.loads(data) for data in iter_sse_data(body)]
    for event in events:
        RESPONSE_EVENTS.validate_python(event)
    kinds = [e["type"] for e in events]
    assert "response.function_call_arguments.delta" not in kinds
    done = next(e for e in events if e["type"] == "response.custom_tool_call_input.done")
    assert done["input"] == "text(1)"
    final = events[-1]["response"]["output"][0]
    assert (final["type"], final["name"], final["namespace"], final["input"]) == (
        "custom_tool_call",
        "exec",
        "functions",
        "text(1)",
    )


# ---------------------------------------------------------------------------------------------- the proxy


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer([Reply(content="hi")] * 8) as server:
        yield server


async def _spans(store: InMemoryLightningStore, rollout: Rollout, count: int) -> list[Any]:
    for _ in range(400):  # bounded wait for the background writer
        spans = sorted(await store.query_spans(rollout.rollout_id), key=lambda s: s.sequence_id)
        if len(spans) >= count:
            return spans
        await asyncio.sleep(0.05)
    raise AssertionError(f"expected {count} span(s)")


async def test_refused_requests_are_recorded_and_doctor_names_them(
    store: InMemoryLightningStore, rollout: Rollout, model: FakeOpenAIServer
) -> None:
    options = RequestOptions(refuse_hosted_tools=True)
    async with LLMProxy({"*": model.base_url}, store=store, request_options=options) as proxy:
        url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id, model="m").endpoint
        async with aiohttp.ClientSession() as http:
            async with http.post(
                url + "/responses", json={"model": "m", "input": "x", "tools": [{"type": "web_search"}]}
            ) as r:
                assert r.status == 400
            async with http.head(url.removesuffix("/v1") + "/api/hello") as r:  # Claude Code's preconnect
                assert r.status == 200
    [span] = await _spans(store, rollout, 1)
    assert span.attributes[REFUSED] is True
    assert span.attributes["http.response.status_code"] == 400
    assert span.status.status_code == "ERROR" and "hosted tool" in (span.status.description or "")
    assert span.attributes["gen_ai.request.model"] == "m"
    for adapter in ("triplet", "proxy-triplet"):  # no advice to route calls that went through the proxy
        report = (await diagnose_rollout(store, rollout.rollout_id, adapter=adapter)).report
        assert [p.code for p in report.problems if p.severity == "error"] == ["proxy_refused"], adapter
        assert not report.triplets


async def test_spans_list_dropped_fields_mark_side_calls_and_strip_volatile_lines(
    store: InMemoryLightningStore, rollout: Rollout, model: FakeOpenAIServer
) -> None:
    options = RequestOptions(
        strip_system_lines=list(KNOWN_VOLATILE_LINES.values()), side_call_models=["*haiku*"]
    )
    async with LLMProxy({"*": model.base_url}, store=store, request_options=options) as proxy:
        url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id, model="m").endpoint.removesuffix(
            "/v1"
        )
        async with aiohttp.ClientSession() as http:
            for body in (
                _claude_request(stream=False),
                _claude_request(stream=False, model="claude-haiku-5"),
            ):
                async with http.post(url + "/v1/messages?beta=true", json=body) as r:
                    assert r.status == 200, await r.text()
    main, side = await _spans(store, rollout, 2)
    assert "thinking" in main.attributes[REQUEST_DROPPED]
    assert SIDE_CALL not in main.attributes and side.attributes[SIDE_CALL] == "*haiku*"
    sent = [r.body for r in model.requests]
    assert sent[0]["messages"][0]["content"] == "You are a Claude agent."
    report = (await diagnose_rollout(store, rollout.rollout_id, adapter="proxy-triplet")).report
    assert len(report.triplets) == 1  # the side call is no training sample
    assert {"side_calls", "proxy_dropped_fields"} <= set(report.codes())


async def test_dropped_side_calls_are_answered_but_not_recorded(
    store: InMemoryLightningStore, rollout: Rollout, model: FakeOpenAIServer
) -> None:
    options = RequestOptions(side_call_models=["small"], side_calls="drop")
    async with LLMProxy({"*": model.base_url}, store=store, request_options=options) as proxy:
        url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id, model="m").endpoint
        async with aiohttp.ClientSession() as http:
            for name in ("small", "big"):
                body = {"model": name, "messages": [{"role": "user", "content": "x"}]}
                async with http.post(url + "/chat/completions", json=body) as r:
                    assert r.status == 200
    spans = await store.query_spans(rollout.rollout_id)  # stopping the proxy flushed its spans
    assert [s.attributes["gen_ai.request.model"] for s in spans] == ["big"]
    assert len(model.requests) == 2


async def test_backend_alias_and_max_tokens_cap_reach_the_model_server(model: FakeOpenAIServer) -> None:
    backend = HttpBackend(url=model.base_url, model="served-name", max_tokens=512)
    async with LLMProxy({"*": [backend]}) as proxy, aiohttp.ClientSession() as http:
        for limit in (64000, 100, None):
            body: dict[str, Any] = {
                "model": "claude-opus-5-5",
                "messages": [{"role": "user", "content": "x"}],
            }
            if limit is not None:
                body["max_tokens"] = limit
            async with http.post(proxy.endpoint + "/chat/completions", json=body) as r:
                assert r.status == 200
    assert [(r.body["model"], r.body.get("max_tokens")) for r in model.requests] == [
        ("served-name", 512),
        ("served-name", 100),
        ("served-name", 512),
    ]


def test_backend_option_takes_an_alias_and_a_cap() -> None:
    spec = parse_backend_options(["*=http://h:8000/v1,model=qwen,max_tokens=4096", "a=http://h:1/v1"])
    assert spec["*"][0].url == "http://h:8000/v1"
    assert (spec["*"][0].model, spec["*"][0].max_tokens) == ("qwen", 4096)
    assert (spec["a"][0].model, spec["a"][0].max_tokens) == (None, None)
    with pytest.raises(Exception, match="max_tokens"):
        parse_backend_options(["*=http://h:8000/v1,max_tokens=lots"])


def test_rollout_new_prints_the_rollouts_urls(tmp_path: Any) -> None:
    store = f"sqlite:///{tmp_path}/agl.db"
    result = CliRunner().invoke(
        build_cli(),
        ["rollout", "new", "--store", store, "--proxy", "http://127.0.0.1:4000/v1", "--format", "json"],
    )
    assert result.exit_code == 0, result.output
    values = json.loads(result.output)
    prefix = f"http://127.0.0.1:4000/rollout/{values['AGL_ROLLOUT_ID']}/attempt/{values['AGL_ATTEMPT_ID']}"
    assert values["OPENAI_BASE_URL"] == prefix + "/v1"
    assert values["ANTHROPIC_BASE_URL"] == prefix
    shown = CliRunner().invoke(build_cli(), ["store", "show", values["AGL_ROLLOUT_ID"], "--store", store])
    assert shown.exit_code == 0, shown.output
