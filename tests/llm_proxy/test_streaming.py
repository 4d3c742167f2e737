"""SSE parsing, stream assembly and stream synthesis."""

from __future__ import annotations

import json

import pytest

from agl_core.llm_proxy.streaming import assemble_chat, assemble_stream, iter_sse_data, synthesize_sse


def test_sse_parsing_handles_crlf_comments_multiline_data_and_done() -> None:
    raw = (
        b": keep-alive comment\r\n\r\n"
        b'event: message\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'
        b'data:{"b":2}\n\n'
        b"data: [DONE]\n\n"
        b'data: {"after": true}\n\n'
    )
    assert [json.loads(d) for d in iter_sse_data(raw)] == [{"a": 1}, {"b": 2}]


def test_chat_chunks_assemble_text_tool_calls_ids_and_logprobs() -> None:
    head = {"id": "c1", "model": "m", "created": 5, "object": "chat.completion.chunk"}
    chunks = [
        {
            **head,
            "prompt_token_ids": [1, 2, 3],
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "token_ids": []}],
        },
        {
            **head,
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": "Hi"},
                    "token_ids": [10],
                    "logprobs": {"content": [{"token": "Hi", "logprob": -0.1}]},
                }
            ],
        },
        {**head, "choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}, "token_ids": [11]}]},
        {
            **head,
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "t1",
                                "type": "function",
                                "function": {"name": "f", "arguments": '{"x"'},
                            }
                        ]
                    },
                    "token_ids": [12, 13],
                }
            ],
        },
        {
            **head,
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]},
                    "token_ids": [14],
                }
            ],
        },
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {**head, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}},
    ]
    out = assemble_chat(chunks)
    assert out["id"] == "c1" and out["prompt_token_ids"] == [1, 2, 3]
    assert out["usage"] == {"prompt_tokens": 3, "completion_tokens": 5}
    [choice] = out["choices"]
    assert choice["token_ids"] == [10, 11, 12, 13, 14]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["logprobs"] == {"content": [{"token": "Hi", "logprob": -0.1}]}
    assert choice["message"] == {
        "role": "assistant",
        "content": "Hi",
        "reasoning_content": "hmm",
        "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}],
    }


def test_error_events_are_kept() -> None:
    raw = (
        b'data: {"id": "x", "choices": [{"index": 0, "delta": {"content": "a"}}]}\n\n'
        b'data: {"error": {"message": "boom"}}\n\n'
    )
    out = assemble_stream(raw, "chat")
    assert out["error"] == {"message": "boom"} and out["choices"][0]["message"]["content"] == "a"


def test_damaged_events_are_skipped_and_counted() -> None:
    raw = (
        b'data: {"choices": [{"index": 0, "delta": {"content": "ok"}, "token_ids": [1]}]}\n\n'
        b'data: [1]\n\ndata: {"cho'
    )
    out = assemble_stream(raw, "chat")
    assert out["agl_unparsed_events"] == 2
    assert out["choices"][0]["token_ids"] == [1] and out["choices"][0]["message"]["content"] == "ok"


CHAT_RESPONSE = {
    "id": "r1",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "prompt_token_ids": [1, 2],
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "hello",
                "tool_calls": [{"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            "finish_reason": "tool_calls",
            "token_ids": [7, 8, 9],
            "logprobs": {"content": [{"token": "h", "logprob": -1.0}]},
        }
    ],
    "usage": {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5},
}


@pytest.mark.parametrize("include_usage", [False, True])
def test_synthesized_chat_stream_round_trips(include_usage: bool) -> None:
    raw = synthesize_sse(CHAT_RESPONSE, "chat", include_usage=include_usage)
    assert raw.endswith(b"data: [DONE]\n\n")
    events = [json.loads(d) for d in iter_sse_data(raw)]
    assert all(e["object"] == "chat.completion.chunk" for e in events)
    assert ("usage" in events[-1]) is include_usage
    back = assemble_stream(raw, "chat")
    choice = back["choices"][0]
    original = CHAT_RESPONSE["choices"][0]
    assert back["prompt_token_ids"] == [1, 2]
    assert choice["token_ids"] == original["token_ids"]
    assert choice["logprobs"] == original["logprobs"]
    assert choice["message"] == original["message"]
    assert choice["finish_reason"] == "tool_calls"


def test_synthesized_completion_stream_round_trips() -> None:
    response = {
        "id": "c",
        "object": "text_completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "text": "abc",
                "finish_reason": "length",
                "token_ids": [4, 5],
                "prompt_token_ids": [1],
                "logprobs": {"tokens": ["a", "bc"], "token_logprobs": [-1.0, -2.0]},
            }
        ],
    }
    back = assemble_stream(synthesize_sse(response, "text_completion"), "text_completion")
    [choice] = back["choices"]
    assert choice["text"] == "abc" and choice["finish_reason"] == "length"
    assert choice["token_ids"] == [4, 5] and choice["prompt_token_ids"] == [1]
    assert choice["logprobs"] == {"tokens": ["a", "bc"], "token_logprobs": [-1.0, -2.0]}


def test_complete_events_end_finds_the_last_event_boundary() -> None:
    from agl_core.llm_proxy.streaming import complete_events_end

    assert complete_events_end(b"data: 1\n\ndata: 2\n\ndata: 3") == len(b"data: 1\n\ndata: 2\n\n")
    assert complete_events_end(b"data: {partial") == 0
    assert complete_events_end(b"data: 1\r\n\r\n") == len(b"data: 1\r\n\r\n")
