"""What the proxy records: one ``agl.llm_proxy.request`` span per proxied request.

The span uses the OpenTelemetry GenAI attributes (``gen_ai.*``; content as JSON strings in the GenAI
"parts" format) plus agl's token-level attributes, which carry the ids exactly as the backend sent them:

* ``prompt_token_ids`` / ``response_token_ids`` (first choice) — lists of ints;
* ``logprobs.content`` — JSON of the first choice's logprobs: the ``logprobs.content`` list for chat, the
  legacy ``{"tokens", "token_logprobs", "top_logprobs", "text_offset"}`` object for text completions;
* ``agl.llm.token_ids_missing`` — present only when a successful response lacks prompt or response token
  ids: a sentence naming which are missing and why (the proxy never retokenises text);
* ``agl.llm.client_api`` — ``"openai.responses"`` or ``"anthropic.messages"`` when the agent used that
  API and the proxy translated it (the span then records the chat request sent to the backend);
* ``agl.llm.request.dropped`` — request fields, items and tools the translation to chat completions
  could not carry (``"thinking"``, ``"include: reasoning.encrypted_content"``, ...); absent when none;
* ``agl.llm.side_call`` — the name of the harness side-call rule the request matched (such calls are
  not the agent's turns; training data builders skip them);
* ``agl.llm.refused`` — true on the span of a request the proxy refused itself (status and reason in
  ``http.response.status_code`` and the span status), so a refused call is visible like any other;
* ``agl.llm.source`` ("proxy"), ``agl.llm.backend``, ``agl.llm.latency_ms``, ``agl.llm.stream``,
  ``agl.llm.attempts`` and ``agl.llm.request.parameters`` (the request's other parameters, as JSON).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

import agl_core.llm_proxy._json as _json
from agl_core.llm_proxy.streaming import Operation, assemble_stream
from agl_core.semconv import (
    AGL_LLM_CLIENT_API,
    AGL_LLM_REFUSED,
    AGL_LLM_REQUEST_DROPPED,
    AGL_LLM_SIDE_CALL,
    AGL_LLM_SOURCE,
    AGL_LLM_TOKEN_IDS_MISSING,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_REQUEST_TOOLS,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_ID,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    LLM_SOURCE_PROXY,
    LOGPROBS_CONTENT,
    PROMPT_TOKEN_IDS,
    RESPONSE_TOKEN_IDS,
    LightningResourceAttributes,
)
from agl_core.types import Span

__all__ = [
    "CLIENT_API",
    "MAX_RECORDED_TEXT_CHARS",
    "REFUSED",
    "REQUEST_DROPPED",
    "SIDE_CALL",
    "SPAN_NAME",
    "TOKEN_IDS_MISSING",
    "Exchange",
    "build_span",
    "input_messages",
    "output_messages",
    "span_attributes",
]

SPAN_NAME = "agl.llm_proxy.request"
"""Name of the span recorded for every proxied request."""

CLIENT_API = AGL_LLM_CLIENT_API
"""Span attribute: the API the agent spoke when the proxy translated it to chat completions."""

REQUEST_DROPPED = AGL_LLM_REQUEST_DROPPED
"""Span attribute: the request fields a translation did not carry to the backend (a list of strings)."""

SIDE_CALL = AGL_LLM_SIDE_CALL
"""Span attribute: the harness side-call rule a request matched (not one of the agent's turns)."""

REFUSED = AGL_LLM_REFUSED
"""Span attribute: true when the proxy itself refused the request (a 4xx of its own)."""

TOKEN_IDS_MISSING = AGL_LLM_TOKEN_IDS_MISSING
"""Span attribute: why a successful call has no prompt and/or response token ids (absent when it has both)."""

_NO_IDS_HINT = (
    "the backend did not return them (agl never retokenises): serve the model with vLLM >= 0.10.2 and "
    "keep HttpBackend(return_token_ids=True), or have an in-process backend return prompt_token_ids and "
    "choices[].token_ids"
)

MAX_RECORDED_TEXT_CHARS = 4 * 1024 * 1024
"""Most characters of text attributes (messages, logprobs, parameters) one span records, all together.

At most 4 UTF-8 bytes each once the span is JSON, so a span stays well under a store's 32 MiB request
limit; longer texts are cut, the largest first, and end with a marker giving the size kept and the full
size. The names of the cut attributes are listed in ``agl.llm.truncated``."""

_MAX_RECORDED_LIST_ITEMS = 1024 * 1024
"""Most token ids one span records; beyond that the lists are left out and the reason recorded."""

_SERVICE_NAME = "agl.llm_proxy"
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")
_CONTENT_KEYS = frozenset({"messages", "prompt", "tools", "model", "stream"})
_SAMPLING: tuple[tuple[str, str], ...] = (
    ("temperature", "gen_ai.request.temperature"),
    ("top_p", "gen_ai.request.top_p"),
    ("top_k", "gen_ai.request.top_k"),
    ("max_tokens", "gen_ai.request.max_tokens"),
    ("max_completion_tokens", "gen_ai.request.max_tokens"),
    ("frequency_penalty", "gen_ai.request.frequency_penalty"),
    ("presence_penalty", "gen_ai.request.presence_penalty"),
    ("seed", "gen_ai.request.seed"),
    ("n", "gen_ai.request.choice.count"),
)


@dataclass(slots=True)
class Exchange:
    """Everything known about one proxied request once it finished; turned into a span off the hot path.

    ``response_body`` holds the backend's raw bytes (JSON, or SSE when ``sse`` is true); in-process
    backends hand over the parsed ``response`` instead.
    """

    rollout_id: str
    attempt_id: str
    sequence_id: int | None
    operation: Operation
    request: dict[str, Any]
    status: int
    start_time: float
    end_time: float
    backend: str
    attempts: int = 1
    response_body: bytes | None = None
    response: dict[str, Any] | None = None
    sse: bool = False
    stream: bool = False
    synthesized: bool = False
    error: str | None = None
    error_type: str | None = None
    traceparent: str | None = None
    client_api: str | None = None
    dropped: list[str] | None = None
    side_call: str | None = None
    refused: bool = False


def _text_parts(content: Any) -> list[dict[str, Any]]:
    """GenAI parts for an OpenAI message ``content`` (a string or a list of content parts)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                parts.append({"type": "text", "content": str(part)})
                continue
            kind = part.get("type")
            if kind in ("text", "input_text", "output_text"):
                parts.append({"type": "text", "content": part.get("text", "")})
            elif kind == "image_url":
                image = part.get("image_url")
                url = image.get("url") if isinstance(image, dict) else image
                parts.append({"type": "uri", "modality": "image", "uri": url})
            elif kind == "input_audio":
                parts.append({"type": "blob", "modality": "audio", "content": part.get("input_audio")})
            else:
                parts.append({"type": kind or "unknown", "content": part})
        return parts
    return [{"type": "text", "content": _json.dumps_str(content)}]


def _tool_call_parts(tool_calls: Any) -> list[dict[str, Any]]:
    """GenAI ``tool_call`` parts; ``arguments`` stays the exact JSON string the model produced."""
    parts: list[dict[str, Any]] = []
    for call in tool_calls or ():
        if not isinstance(call, dict):
            continue
        function = call.get("function") or {}
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": function.get("name"),
                "arguments": function.get("arguments"),
            }
        )
    return parts


def _message(message: Mapping[str, Any]) -> dict[str, Any]:
    role = message.get("role", "user")
    content = message.get("content")
    if type(content) is str and len(message) == 2:  # the common {"role", "content": str} message
        return {"role": role, "parts": [{"type": "text", "content": content}]}
    if role == "tool":
        parts: list[dict[str, Any]] = [
            {"type": "tool_call_response", "id": message.get("tool_call_id"), "response": content}
        ]
    else:
        parts = []
        reasoning = message.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            parts.append({"type": "reasoning", "content": reasoning})
        parts.extend(_text_parts(content))
        parts.extend(_tool_call_parts(message.get("tool_calls")))
    out: dict[str, Any] = {"role": role, "parts": parts}
    name = message.get("name")
    if isinstance(name, str):
        out["name"] = name
    return out


def input_messages(operation: Operation, request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The request's input in GenAI format: chat messages, or the prompt(s) as user messages.

    A text-completion prompt given as token ids becomes a part ``{"type": "token_ids", "content": ids}``.
    """
    if operation == "chat":
        return [_message(m) for m in request.get("messages") or () if isinstance(m, dict)]
    prompt = request.get("prompt")
    prompts: Sequence[Any]
    if isinstance(prompt, str) or (
        isinstance(prompt, list) and prompt and all(type(t) is int for t in prompt)
    ):
        prompts = [prompt]
    else:
        prompts = prompt if isinstance(prompt, list) else []
    out = []
    for item in prompts:
        part = (
            {"type": "text", "content": item}
            if isinstance(item, str)
            else {"type": "token_ids", "content": item}
        )
        out.append({"role": "user", "parts": [part]})
    return out


def output_messages(operation: Operation, response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every choice of the response as a GenAI output message with its ``finish_reason``."""
    out = []
    for choice in response.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        if operation == "chat":
            message = _message(choice.get("message") or {"role": "assistant"})
        else:
            message = {"role": "assistant", "parts": _text_parts(choice.get("text"))}
        message["finish_reason"] = choice.get("finish_reason")
        out.append(message)
    return out


_NUMBER_TYPES = (int, float)
_SAMPLING_BY_KEY = dict(_SAMPLING)


def _first_choice(response: Mapping[str, Any]) -> Mapping[str, Any]:
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return choices[0]
    return {}


def span_attributes(exchange: Exchange, response: Mapping[str, Any] | None) -> dict[str, Any]:
    """The span attributes of one exchange (``response`` is the parsed or assembled response)."""
    request = exchange.request
    attrs: dict[str, Any] = {
        GEN_AI_OPERATION_NAME: exchange.operation,
        AGL_LLM_SOURCE: LLM_SOURCE_PROXY,
        "agl.llm.backend": exchange.backend,
        "agl.llm.latency_ms": round((exchange.end_time - exchange.start_time) * 1000.0, 3),
        "agl.llm.stream": exchange.stream,
        "agl.llm.attempts": exchange.attempts,
        "http.response.status_code": exchange.status,
    }
    if exchange.synthesized:
        attrs["agl.llm.stream_synthesized"] = True
    if exchange.client_api is not None:
        attrs[CLIENT_API] = exchange.client_api
    if exchange.dropped:
        attrs[REQUEST_DROPPED] = list(exchange.dropped)
    if exchange.side_call is not None:
        attrs[SIDE_CALL] = exchange.side_call
    if exchange.refused:
        attrs[REFUSED] = True
    parameters: dict[str, Any] = {}
    for key, value in request.items():  # one pass: sampling attributes and the other parameters
        if key in _CONTENT_KEYS:
            continue
        if type(value) is float and value - value != 0:  # NaN/Infinity: null (JSON has neither)
            value = None
        parameters[key] = value
        attr = _SAMPLING_BY_KEY.get(key)
        if attr is not None and type(value) in _NUMBER_TYPES:
            attrs[attr] = value
        elif key == "stop":
            if isinstance(value, str):
                attrs["gen_ai.request.stop_sequences"] = [value]
            elif isinstance(value, list) and all(isinstance(item, str) for item in value):
                attrs["gen_ai.request.stop_sequences"] = value
    model = request.get("model")
    if isinstance(model, str):
        attrs[GEN_AI_REQUEST_MODEL] = model
    if parameters:
        attrs["agl.llm.request.parameters"] = _json.dumps_str(parameters)
    tools = request.get("tools")
    if tools is not None:
        attrs[GEN_AI_REQUEST_TOOLS] = _json.dumps_str(tools)
    attrs[GEN_AI_INPUT_MESSAGES] = _json.dumps_str(input_messages(exchange.operation, request))
    if exchange.error_type is not None:
        attrs["error.type"] = exchange.error_type
    if response is None:
        return attrs

    if isinstance(response.get("id"), str):
        attrs[GEN_AI_RESPONSE_ID] = response["id"]
    if isinstance(response.get("model"), str):
        attrs[GEN_AI_RESPONSE_MODEL] = response["model"]
    choices = response.get("choices")
    if isinstance(choices, list):
        reasons = [c.get("finish_reason") for c in choices if isinstance(c, dict)]
        attrs[GEN_AI_RESPONSE_FINISH_REASONS] = [r for r in reasons if isinstance(r, str)]
        attrs[GEN_AI_OUTPUT_MESSAGES] = _json.dumps_str(output_messages(exchange.operation, response))
    first = _first_choice(response)
    prompt_ids = response.get("prompt_token_ids")
    if prompt_ids is None:
        prompt_ids = first.get("prompt_token_ids")
    if type(prompt_ids) is list:
        attrs[PROMPT_TOKEN_IDS] = prompt_ids
    else:
        prompt_ids = None
    response_ids = first.get("token_ids")
    if type(response_ids) is list:
        attrs[RESPONSE_TOKEN_IDS] = response_ids
    logprobs = first.get("logprobs")
    if exchange.operation == "chat" and isinstance(logprobs, dict):
        logprobs = logprobs.get("content")
    if logprobs is not None:
        attrs[LOGPROBS_CONTENT] = _json.dumps_str(logprobs)
    usage = response.get("usage")
    if isinstance(usage, dict) and type(usage.get("prompt_tokens")) is int:
        attrs[GEN_AI_USAGE_INPUT_TOKENS] = usage["prompt_tokens"]
        if type(usage.get("completion_tokens")) is int:
            attrs[GEN_AI_USAGE_OUTPUT_TOKENS] = usage["completion_tokens"]
    else:
        if prompt_ids is not None:
            attrs[GEN_AI_USAGE_INPUT_TOKENS] = len(prompt_ids)
        if isinstance(choices, list) and all(
            isinstance(c, dict) and isinstance(c.get("token_ids"), list) for c in choices
        ):
            attrs[GEN_AI_USAGE_OUTPUT_TOKENS] = sum(len(c["token_ids"]) for c in choices)
    if PROMPT_TOKEN_IDS not in attrs or RESPONSE_TOKEN_IDS not in attrs:
        missing = [name for name in (PROMPT_TOKEN_IDS, RESPONSE_TOKEN_IDS) if name not in attrs]
        attrs[TOKEN_IDS_MISSING] = f"no {' and no '.join(missing)}: {_NO_IDS_HINT}"
    return attrs


def _parsed_response(exchange: Exchange) -> tuple[dict[str, Any] | None, str | None]:
    """The response as a dict (parsing JSON or assembling SSE), or None and the reason."""
    if exchange.response is not None:
        return exchange.response, None
    body = exchange.response_body
    if not body:
        return None, None
    try:
        parsed = assemble_stream(body, exchange.operation) if exchange.sse else _json.loads(body)
    except ValueError as exc:
        return None, f"the backend's response is not valid JSON: {exc}"
    if not isinstance(parsed, dict):
        return None, "the backend's response is not a JSON object"
    unparsed = parsed.pop("agl_unparsed_events", 0)
    if unparsed:
        return parsed, f"{unparsed} streamed event(s) were not valid JSON"
    return parsed, None


def build_span(exchange: Exchange, sequence_id: int) -> Span:
    """Build the ``agl.llm_proxy.request`` span of a finished exchange.

    The span joins the agent's trace when the request carried a W3C ``traceparent`` header. Its status
    is ERROR, with a description, when the request failed or the response could not be read.
    """
    response, problem = _parsed_response(exchange)
    error = exchange.error
    if response is not None and "error" in response and exchange.status < 400:
        inner = response["error"]
        error = error or (inner.get("message") if isinstance(inner, dict) else None) or str(inner)
    if problem is not None:
        error = f"{error}; {problem}" if error else problem
    attrs = span_attributes(exchange, response if exchange.status < 400 else None)
    trace_id = parent_id = None
    if exchange.traceparent:
        match = _TRACEPARENT.match(exchange.traceparent.strip().lower())
        if match and set(match.group(1)) != {"0"} and set(match.group(2)) != {"0"}:
            trace_id, parent_id = match.group(1), match.group(2)
    failed = exchange.status >= 400 or error is not None
    ids = _random_ids()
    trace_id = trace_id or ids[:32]
    span_id = ids[32:]
    data: dict[str, Any] = {
        "rollout_id": exchange.rollout_id,
        "attempt_id": exchange.attempt_id,
        "sequence_id": sequence_id,
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_id": parent_id,
        "name": SPAN_NAME,
        "status": {"status_code": "ERROR", "description": error} if failed else {"status_code": "OK"},
        "attributes": attrs,
        "events": [],
        "links": [],
        "start_time": exchange.start_time,
        "end_time": exchange.end_time,
        "context": {"trace_id": trace_id, "span_id": span_id, "is_remote": False, "trace_state": {}},
        "parent": (
            {"trace_id": trace_id, "span_id": parent_id, "is_remote": True, "trace_state": {}}
            if parent_id
            else None
        ),
        "resource": {
            "attributes": {
                "service.name": _SERVICE_NAME,
                # 0.3's LiteLLM exporter put the ids here; 0.3 readers of the resource find them.
                LightningResourceAttributes.ROLLOUT_ID.value: exchange.rollout_id,
                LightningResourceAttributes.ATTEMPT_ID.value: exchange.attempt_id,
                LightningResourceAttributes.SPAN_SEQUENCE_ID.value: sequence_id,
            },
            "schema_url": "",
        },
    }
    _fit_budget(attrs)
    # One validation of plain data: cheaper than building the nested models one by one (and than
    # pydantic's model_construct, which is pure Python).
    try:
        return Span.model_validate(data)
    except ValidationError:
        # Only the token id lists come from the backend unchecked: record the call without them.
        attrs.pop(PROMPT_TOKEN_IDS, None)
        attrs.pop(RESPONSE_TOKEN_IDS, None)
        problem = "the backend's token ids are not lists of integers; they were not recorded"
        attrs[TOKEN_IDS_MISSING] = problem
        data["status"] = {"status_code": "ERROR", "description": f"{error}; {problem}" if error else problem}
        return Span.model_validate(data)


def _fit_budget(attrs: dict[str, Any]) -> None:
    """Cut ``attrs`` to what a store takes: `MAX_RECORDED_TEXT_CHARS` of text, `_MAX_RECORDED_LIST_ITEMS` ids.

    Texts share the budget fairly (short ones whole, the rest cut to equal shares), each cut text ends
    with a marker, and ``agl.llm.truncated`` names them. Oversized token id lists are dropped (a cut
    list would train on wrong ids) and ``TOKEN_IDS_MISSING`` says why.
    """
    texts = sorted(
        ((len(value), key) for key, value in attrs.items() if type(value) is str and len(value) > 1024),
    )
    total = sum(size for size, _ in texts)
    if total + len(attrs) * 1024 > MAX_RECORDED_TEXT_CHARS:
        remaining = MAX_RECORDED_TEXT_CHARS - len(attrs) * 1024
        cut: list[str] = []
        for index, (size, key) in enumerate(texts):
            share = remaining // (len(texts) - index)
            if size > share:
                marker = f"…[truncated by the LLM proxy: kept {share} of {size} characters]"
                attrs[key] = attrs[key][: max(share - len(marker), 0)] + marker
                cut.append(key)
            remaining -= min(size, share)
        attrs["agl.llm.truncated"] = sorted(cut)
    ids = [key for key in (PROMPT_TOKEN_IDS, RESPONSE_TOKEN_IDS) if key in attrs]
    if sum(len(attrs[key]) for key in ids) > _MAX_RECORDED_LIST_ITEMS:
        for key in ids:
            del attrs[key]
        attrs[TOKEN_IDS_MISSING] = (
            f"more than {_MAX_RECORDED_LIST_ITEMS} token ids in one call; the proxy records at most that many"
        )


def _random_ids() -> str:
    """48 random hex digits: a trace id (32) and a span id (16), neither all zeros (OpenTelemetry rule)."""
    while True:
        ids = f"{random.getrandbits(192):048x}"
        if ids[:32] != _ZERO_TRACE and ids[32:] != _ZERO_SPAN:
            return ids


_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16
