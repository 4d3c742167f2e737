"""The span recorded for one exchange: GenAI attributes, agl token attributes, trace joining, errors."""

from __future__ import annotations

import json
from typing import Any

from agl_core.llm_proxy import _json
from agl_core.llm_proxy.recording import SPAN_NAME, Exchange, build_span, input_messages
from agl_core.llm_proxy.streaming import synthesize_sse

REQUEST: dict[str, Any] = {
    "model": "policy",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "look", "arguments": '{"z": 2}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a cat"},
    ],
    "temperature": 0.2,
    "top_p": 0.9,
    "max_completion_tokens": 64,
    "n": 1,
    "stop": "END",
    "presence_penalty": 0.0,
    "logprobs": True,
    "tools": [{"type": "function", "function": {"name": "look"}}],
}
RESPONSE: dict[str, Any] = {
    "id": "chatcmpl-1",
    "model": "policy-v7",
    "prompt_token_ids": [5, 6, 7],
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "A cat."},
            "finish_reason": "stop",
            "token_ids": [40, 41, 42],
            "logprobs": {"content": [{"token": "A", "logprob": -0.25, "top_logprobs": []}]},
        }
    ],
}


def _exchange(**overrides: Any) -> Exchange:
    fields: dict[str, Any] = {
        "rollout_id": "ro-1",
        "attempt_id": "at-1",
        "sequence_id": 4,
        "operation": "chat",
        "request": REQUEST,
        "status": 200,
        "start_time": 100.0,
        "end_time": 100.25,
        "backend": "http://gpu:8000/v1",
        "response_body": _json.dumps(RESPONSE),
    }
    fields.update(overrides)
    return Exchange(**fields)


def test_span_identity_and_genai_attributes() -> None:
    span = build_span(_exchange(), 4)
    attrs = span.attributes
    assert (span.name, span.rollout_id, span.attempt_id, span.sequence_id) == (SPAN_NAME, "ro-1", "at-1", 4)
    assert (span.start_time, span.end_time) == (100.0, 100.25)
    assert span.status.status_code == "OK"
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == "policy" and attrs["gen_ai.response.model"] == "policy-v7"
    assert attrs["gen_ai.response.id"] == "chatcmpl-1"
    assert attrs["gen_ai.request.temperature"] == 0.2 and attrs["gen_ai.request.top_p"] == 0.9
    assert attrs["gen_ai.request.max_tokens"] == 64 and attrs["gen_ai.request.choice.count"] == 1
    assert attrs["gen_ai.request.presence_penalty"] == 0.0
    assert attrs["gen_ai.request.stop_sequences"] == ["END"]
    assert json.loads(attrs["agl.llm.request.parameters"])["logprobs"] is True
    assert json.loads(attrs["gen_ai.request.tools"]) == REQUEST["tools"]
    assert attrs["agl.llm.latency_ms"] == 250.0 and attrs["agl.llm.backend"] == "http://gpu:8000/v1"
    # token attributes are exactly the backend's values
    assert attrs["prompt_token_ids"] == [5, 6, 7] and attrs["response_token_ids"] == [40, 41, 42]
    assert json.loads(attrs["logprobs.content"]) == RESPONSE["choices"][0]["logprobs"]["content"]
    # no usage in the response: counts come from the token ids
    assert attrs["gen_ai.usage.input_tokens"] == 3 and attrs["gen_ai.usage.output_tokens"] == 3


def test_input_messages_use_genai_parts() -> None:
    assert input_messages("chat", REQUEST) == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "What is this?"},
                {"type": "uri", "modality": "image", "uri": "data:image/png;base64,AAAA"},
            ],
        },
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "c1", "name": "look", "arguments": '{"z": 2}'}],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "a cat"}]},
    ]
    assert input_messages("text_completion", {"prompt": [[1, 2], "txt"]}) == [
        {"role": "user", "parts": [{"type": "token_ids", "content": [1, 2]}]},
        {"role": "user", "parts": [{"type": "text", "content": "txt"}]},
    ]


def test_span_joins_the_agents_trace_from_traceparent() -> None:
    trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    span = build_span(_exchange(traceparent=f"00-{trace_id}-{parent}-01"), 1)
    assert span.trace_id == trace_id and span.parent_id == parent
    for bad in ("garbage", f"00-{'0' * 32}-{parent}-01"):
        unjoined = build_span(_exchange(traceparent=bad), 1)
        assert unjoined.parent_id is None and len(unjoined.trace_id) == 32


def test_streamed_exchange_is_assembled_before_recording() -> None:
    sse = synthesize_sse(RESPONSE, "chat")
    span = build_span(_exchange(response_body=sse, sse=True, stream=True), 2)
    assert span.attributes["response_token_ids"] == [40, 41, 42]
    assert span.attributes["prompt_token_ids"] == [5, 6, 7]
    assert span.attributes["agl.llm.stream"] is True


def test_failures_are_error_spans() -> None:
    upstream = build_span(_exchange(status=400, error="context too long", error_type="400"), 1)
    assert upstream.status.status_code == "ERROR" and upstream.status.description == "context too long"
    assert upstream.attributes["error.type"] == "400" and "response_token_ids" not in upstream.attributes
    garbled = build_span(_exchange(response_body=b"<html>oops</html>"), 1)
    assert garbled.status.status_code == "ERROR" and "not valid JSON" in garbled.status.description
    cut = synthesize_sse(RESPONSE, "chat")[:-40]  # the stream broke off inside its last event
    broken = build_span(
        _exchange(
            response_body=cut,
            sse=True,
            error="the backend's stream broke off",
            error_type="stream_interrupted",
        ),
        1,
    )
    assert broken.status.status_code == "ERROR"
    assert broken.status.description.startswith("the backend's stream broke off")
    assert "not valid JSON" in broken.status.description
    assert broken.attributes["response_token_ids"] == [40, 41, 42]  # the complete events are kept
    errored = build_span(_exchange(response_body=b'data: {"error": {"message": "cut"}}\n\n', sse=True), 1)
    assert errored.status.status_code == "ERROR" and errored.status.description == "cut"


def test_malformed_token_ids_from_the_backend_do_not_lose_the_record() -> None:
    broken = {**RESPONSE, "prompt_token_ids": [1, "two", 3]}
    span = build_span(_exchange(response_body=_json.dumps(broken)), 1)
    assert span.status.status_code == "ERROR" and "not lists of integers" in span.status.description
    assert "prompt_token_ids" not in span.attributes and "response_token_ids" not in span.attributes
    assert span.attributes["gen_ai.response.id"] == "chatcmpl-1"  # the rest is kept


def test_sampling_parameters_are_taken_from_the_request() -> None:
    request = {"model": "m", "messages": [], "temperature": 1, "top_k": 20, "stop": ["a", "b"], "seed": True}
    attrs = build_span(_exchange(request=request), 1).attributes
    assert attrs["gen_ai.request.temperature"] == 1 and attrs["gen_ai.request.top_k"] == 20
    assert attrs["gen_ai.request.stop_sequences"] == ["a", "b"]
    assert "gen_ai.request.seed" not in attrs  # a bool is not a seed
    assert json.loads(attrs["agl.llm.request.parameters"]) == {
        "temperature": 1,
        "top_k": 20,
        "stop": ["a", "b"],
        "seed": True,
    }
