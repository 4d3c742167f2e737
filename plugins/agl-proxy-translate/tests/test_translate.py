"""Edge cases of the Responses / Anthropic Messages <-> chat translation, checked against the SDKs' types."""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic.types import Message, RawMessageStreamEvent
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from agl_core.llm_proxy.errors import ProxyHTTPError
from agl_core.llm_proxy.streaming import iter_sse_data
from agl_proxy_translate.messages import MessagesStream, chat_to_message, messages_to_chat
from agl_proxy_translate.responses import (
    _HOSTED_TOOL_HINT,
    ResponsesStream,
    chat_to_response,
    responses_to_chat,
)
from agl_proxy_translate.translation import Translation

RESPONSE_EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
MESSAGE_EVENTS: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)


def _chat(message: dict[str, Any], finish: str = "stop", **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-abc",
        "object": "chat.completion",
        "created": 7,
        "model": "served",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish, **extra}
        ],
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": 4,
            "total_tokens": 14,
            "prompt_tokens_details": {"cached_tokens": 6},
            "completion_tokens_details": {"reasoning_tokens": 2},
        },
    }


def _fragmented_chunks() -> list[dict[str, Any]]:
    """Reasoning, then text, then two parallel tool calls whose names and arguments come in pieces."""
    head = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 3, "model": "served"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    return [
        chunk({"role": "assistant", "reasoning_content": "think "}),
        chunk({"reasoning_content": "more"}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}),
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]}),
        chunk(
            {
                "tool_calls": [
                    {"index": 1, "id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": " 1}"}}]}),
        chunk({}, "tool_calls"),
        {**head, "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}},
    ]


def _events(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(data) for data in iter_sse_data(raw)]


# ---------------------------------------------------------------------------------------------- Responses


def test_responses_request_translation_covers_roles_calls_formats_and_logprobs() -> None:
    chat = responses_to_chat(
        {
            "model": "m",
            "instructions": "sys",
            "input": [
                {"role": "developer", "content": "dev note"},
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Let me see."}],
                },
                {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
                {"type": "function_call", "call_id": "b", "name": "g", "arguments": '{"x":1}'},
                {"type": "function_call_output", "call_id": "a", "output": "1"},
                {
                    "type": "function_call_output",
                    "call_id": "b",
                    "output": [{"type": "input_text", "text": "2"}],
                },
            ],
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True}],
            "tool_choice": {"type": "function", "name": "f"},
            "include": ["message.output_text.logprobs"],
            "top_logprobs": 2,
            "text": {
                "format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": True}
            },
            "max_output_tokens": 20,
            "temperature": 0.3,
            "stream": True,
            "store": True,
            "metadata": {"k": "v"},
            "reasoning": {"effort": "low", "summary": "auto"},
        }
    )
    assert chat["reasoning_effort"] == "low"
    assert chat["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "system", "content": "dev note"},
        {
            "role": "assistant",
            "content": "Let me see.",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": '{"x":1}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
    ]
    assert chat["tools"] == [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": True}}
    ]
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert chat["logprobs"] is True and chat["top_logprobs"] == 2
    assert chat["response_format"]["json_schema"]["name"] == "out"
    assert chat["max_tokens"] == 20 and chat["temperature"] == 0.3
    assert chat["stream"] is True and chat["stream_options"] == {"include_usage": True}
    assert "store" not in chat and "metadata" not in chat


def test_hosted_tools_are_dropped_and_listed_or_refused_on_request() -> None:
    notes = Translation()
    chat = responses_to_chat({"model": "m", "input": "x", "tools": [{"type": "web_search"}]}, notes)
    assert "tools" not in chat
    assert notes.dropped == ["tools[0]: hosted tool 'web_search' (" + _HOSTED_TOOL_HINT + ")"]
    with pytest.raises(ProxyHTTPError, match="hosted tool") as caught:
        responses_to_chat(
            {"model": "m", "input": "x", "tools": [{"type": "file_search"}]},
            Translation(refuse_hosted_tools=True),
        )
    assert caught.value.status == 400


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ({"input": []}, "'input' is required"),
        ({"input": [{"type": "input_file_search"}]}, "not supported"),
        ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}, "input_file"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]}, "image_url"),
        ({"input": [{"role": "robot", "content": "x"}]}, "role"),
        ({"input": "x", "conversation": "c"}, "conversation"),
        ({"input": "x", "text": {"format": {"type": "grammar"}}}, "text.format"),
    ],
)
def test_untranslatable_responses_requests_are_refused_with_a_reason(
    payload: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ProxyHTTPError, match=fragment) as caught:
        responses_to_chat({"model": "m", **payload})
    assert caught.value.status == 400


def test_chat_answers_become_valid_responses() -> None:
    logprobs = {"content": [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "top_logprobs": []}]}
    answer = _chat(
        {
            "content": "Hi",
            "reasoning_content": "hmm",
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        finish="content_filter",
        logprobs=logprobs,
    )
    request = {"model": "m", "input": "x", "include": ["message.output_text.logprobs"]}
    response = Response.model_validate(chat_to_response(answer, request))
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    assert response.output_text == "Hi" and response.status == "incomplete"
    assert response.incomplete_details is not None and response.incomplete_details.reason == "content_filter"
    message = response.output[1]
    assert message.type == "message" and message.content[0].logprobs[0].token == "Hi"  # type: ignore[union-attr]
    assert response.usage is not None and response.usage.input_tokens_details.cached_tokens == 6
    assert response.usage.output_tokens_details.reasoning_tokens == 2
    plain = chat_to_response(answer, {"model": "m", "input": "x"})
    assert plain["output"][1]["content"][0]["logprobs"] == []  # only when asked for


def test_a_fragmented_chat_stream_becomes_a_valid_responses_event_sequence() -> None:
    stream = ResponsesStream({"model": "m", "input": "x"})
    raw = b"".join(stream.feed(chunk) for chunk in _fragmented_chunks()) + stream.finish()
    events = [RESPONSE_EVENTS.validate_python(event) for event in _events(raw)]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [e.type for e in events]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert kinds.count("response.output_item.added") == kinds.count("response.output_item.done") == 4
    assert kinds[-1] == "response.completed"
    final = events[-1].response
    assert [item.type for item in final.output] == ["reasoning", "message", "function_call", "function_call"]
    assert final.output[0].content[0].text == "think more"
    assert final.output_text == "Hello"
    calls = [item for item in final.output if item.type == "function_call"]
    assert [(c.call_id, c.name, c.arguments) for c in calls] == [("c1", "f", '{"a": 1}'), ("c2", "g", "{}")]
    added = {e.item.id for e in events if e.type == "response.output_item.added"}
    assert added == {item.id for item in final.output}  # streamed ids match the final response's
    assert final.usage is not None and final.usage.total_tokens == 14


def test_a_broken_stream_ends_with_error_and_failed_events() -> None:
    stream = ResponsesStream({"model": "m", "input": "x"})
    raw = stream.feed(_fragmented_chunks()[2]) + stream.fail("backend went away", "stream_interrupted")
    events = [RESPONSE_EVENTS.validate_python(event) for event in _events(raw)]
    assert [e.type for e in events][-2:] == ["error", "response.failed"]
    assert events[-1].response.status == "failed"


# ---------------------------------------------------------------------------------------------- Anthropic


def test_messages_request_translation_covers_choice_stops_images_and_results() -> None:
    chat = messages_to_chat(
        {
            "model": "m",
            "max_tokens": 50,
            "system": [
                {"type": "text", "text": "a"},
                {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}},
            ],
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "image", "source": {"type": "url", "url": "https://x/i.png"}}],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "t", "signature": "s"},
                        {"type": "tool_use", "id": "u1", "name": "shot", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "u1",
                            "is_error": False,
                            "content": [
                                {"type": "text", "text": "see image"},
                                {
                                    "type": "image",
                                    "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAA"},
                                },
                            ],
                        }
                    ],
                },
            ],
            "tools": [
                {"name": "shot", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}
            ],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
            "stop_sequences": ["END"],
            "top_k": 5,
            "metadata": {"user_id": "u"},
        }
    )
    assert chat["messages"] == [
        {"role": "system", "content": "a\nb"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/i.png"}}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "u1", "type": "function", "function": {"name": "shot", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "u1", "content": "see image"},
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAA"}}],
        },
    ]
    assert chat["tool_choice"] == "required" and chat["parallel_tool_calls"] is False
    assert chat["stop"] == ["END"] and chat["top_k"] == 5 and chat["max_tokens"] == 50
    assert messages_to_chat(
        {
            "model": "m",
            "max_tokens": 1,
            "messages": [{"role": "user", "content": "x"}],
            "tool_choice": {"type": "tool", "name": "f"},
        }
    )["tool_choice"] == {"type": "function", "function": {"name": "f"}}


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
        ({"max_tokens": 5, "messages": []}, "messages"),
        ({"max_tokens": 5, "messages": [{"role": "robot", "content": "x"}]}, "role"),
        ({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "document"}]}]}, "document"),
        (
            {
                "max_tokens": 5,
                "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "web_search_20250305", "name": "web_search"}],
            },
            "server tool",
        ),
        (
            {
                "max_tokens": 5,
                "messages": [{"role": "user", "content": "x"}],
                "tool_choice": {"type": "maybe"},
            },
            "tool_choice",
        ),
    ],
)
def test_untranslatable_messages_requests_are_refused_with_a_reason(
    payload: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ProxyHTTPError, match=fragment):
        messages_to_chat({"model": "m", **payload})


def test_chat_answers_become_valid_anthropic_messages() -> None:
    answer = _chat(
        {
            "content": "ok",
            "reasoning_content": "r",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "not json"}}
            ],
        },
        finish="tool_calls",
    )
    message = Message.model_validate(chat_to_message(answer, {"model": "m"}))
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
    assert message.content[2].input == {"_raw_arguments": "not json"}  # type: ignore[union-attr]
    assert message.stop_reason == "tool_use"
    assert (
        message.usage.input_tokens,
        message.usage.cache_read_input_tokens,
        message.usage.output_tokens,
    ) == (4, 6, 4)
    stopped = chat_to_message(_chat({"content": "x"}, stop_reason="END"), {"stop_sequences": ["END"]})
    assert (stopped["stop_reason"], stopped["stop_sequence"]) == ("stop_sequence", "END")
    assert chat_to_message(_chat({"content": "x"}, finish="length"), {})["stop_reason"] == "max_tokens"


def test_a_fragmented_chat_stream_becomes_a_valid_anthropic_event_sequence() -> None:
    stream = MessagesStream({"model": "m"})
    raw = b"".join(stream.feed(chunk) for chunk in _fragmented_chunks()) + stream.finish()
    events = [MESSAGE_EVENTS.validate_python(event) for event in _events(raw)]
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    starts = [e.content_block.type for e in events if e.type == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use", "tool_use"]
    # one block at a time, each started and stopped in order, even though the chat stream interleaved
    # the two calls' argument pieces
    order = [(e.type, e.index) for e in events if e.type in ("content_block_start", "content_block_stop")]
    assert order == [
        (kind, index) for index in range(4) for kind in ("content_block_start", "content_block_stop")
    ]
    partial: dict[int, str] = {}
    for e in events:
        if e.type == "content_block_delta" and e.delta.type == "input_json_delta":
            partial[e.index] = partial.get(e.index, "") + e.delta.partial_json
    assert partial == {2: '{"a": 1}', 3: "{}"}
    assert events[-2].delta.stop_reason == "tool_use" and events[-2].usage.output_tokens == 9
