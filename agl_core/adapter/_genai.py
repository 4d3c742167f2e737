"""Read LLM-call spans: token ids, logprobs, messages and tools, in every shape agl accepts.

Message content comes from the OpenTelemetry GenAI JSON attributes (``gen_ai.input.messages`` /
``gen_ai.output.messages`` in the "parts" format) or, for Agent Lightning 0.3 traces, from the
flattened ``gen_ai.prompt.<i>.*`` / ``gen_ai.completion.<i>.*`` attributes or the operation fallbacks.
Everything is returned as OpenAI chat messages (``{"role", "content", "tool_calls"?, "tool_call_id"?}``),
so triplets and SFT samples look the same whatever produced the span.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from typing import Any

from agl_core.semconv import (
    AGL_LLM_SOURCE,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_REQUEST_TOOLS,
    GEN_AI_RESPONSE_ID,
    LLM_SOURCE_PROXY,
    LOGPROBS_CONTENT,
    PROMPT_TOKEN_IDS,
    RESPONSE_TOKEN_IDS,
)
from agl_core.types import Span
from agl_core.utils.otel import filter_and_unflatten_attributes

__all__ = [
    "AGENT_NAME",
    "LLM_SOURCE",
    "PROXY_SPAN_NAME",
    "completion_messages",
    "image_urls",
    "is_proxy_llm_span",
    "llm_call_pattern",
    "logprobs",
    "prompt_messages",
    "prompt_token_ids",
    "request_tools",
    "response_id",
    "response_token_ids",
    "unflatten_prefix",
]

LLM_SOURCE = AGL_LLM_SOURCE
"""Attribute naming who recorded an LLM call: ``"tracer"`` or ``"proxy"``."""
PROXY_SPAN_NAME = "agl.llm_proxy.request"
"""Name of the span the agl LLM proxy records per request."""
AGENT_NAME = "gen_ai.agent.name"
"""OpenTelemetry GenAI attribute naming the agent a span belongs to."""

_PROMPT_IDS_KEYS = (PROMPT_TOKEN_IDS, "agentlightning.operation.output.prompt_token_ids")
_RESPONSE_IDS_KEYS = (
    RESPONSE_TOKEN_IDS,
    "agentlightning.operation.output.response_token_ids.0",
    "agentlightning.operation.output.choices.0.token_ids",
    "agentlightning.operation.output.choices.0.provider_specific_fields.token_ids",
)
_RESPONSE_ID_KEYS = (GEN_AI_RESPONSE_ID, "agentlightning.operation.output.id", "llm.hosted_vllm.id")
_IMAGE_PART_TYPES = ("image_url", "input_image", "image")


def _where(span: Span, key: str) -> str:
    return f"span {span.name!r} ({span.span_id}), attribute {key!r}"


def unflatten_prefix(attributes: Mapping[str, Any], prefix: str) -> Any:
    """The value under ``prefix``: the attribute itself or its ``prefix.*`` keys rebuilt; None if absent."""
    if prefix in attributes:
        return attributes[prefix]
    dotted = prefix + "."
    if not any(key.startswith(dotted) for key in attributes):
        return None
    return filter_and_unflatten_attributes(dict(attributes), prefix)


def _as_token_ids(value: Any) -> list[int] | None:
    """A list of ints from a list attribute, a JSON string or a Python literal string; None if not ids."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                return None
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
            value = value[0]  # ``response_token_ids`` of one choice stored as a nested list
    if isinstance(value, (list, tuple)) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in value
    ):
        return list(value)
    return None


def _first_ids(span: Span, keys: tuple[str, ...]) -> list[int] | None:
    for key in keys:
        if key in span.attributes:
            ids = _as_token_ids(span.attributes[key])
            if ids is not None:
                return ids
    return None


def prompt_token_ids(span: Span) -> list[int] | None:
    """The prompt token ids the server returned for this call, or None when the span has none."""
    ids = _first_ids(span, _PROMPT_IDS_KEYS)
    if ids is None and "llm.hosted_vllm.prompt_token_ids" in span.attributes:
        ids = _as_token_ids(span.attributes["llm.hosted_vllm.prompt_token_ids"])
    return ids


def response_token_ids(span: Span) -> list[int] | None:
    """The response token ids of the first choice, or None when the span has none."""
    ids = _first_ids(span, _RESPONSE_IDS_KEYS)
    if ids is None:
        ids = _first_ids(span, ("llm.hosted_vllm.response_token_ids", "llm.hosted_vllm.response_token_ids.0"))
    if ids is None:
        ids = _first_ids(span, ("llm.hosted_vllm.choices.0.token_ids",))
    return ids


def response_id(span: Span) -> str | None:
    """The provider's response id (``gen_ai.response.id`` and fallbacks), or None."""
    for key in _RESPONSE_ID_KEYS:
        value = span.attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def logprobs(span: Span) -> Any:
    """The decoded ``logprobs.content`` attribute (OpenAI per-token entries), or None."""
    value = span.attributes.get(LOGPROBS_CONTENT)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def is_proxy_llm_span(span: Span) -> bool:
    """Whether the agl LLM proxy (or Agent Lightning 0.3's LiteLLM proxy) recorded this span."""
    return (
        span.attributes.get(LLM_SOURCE) == LLM_SOURCE_PROXY
        or span.name == PROXY_SPAN_NAME
        or span.name in ("raw_gen_ai_request", "litellm_request")
    )


# ---------------------------------------------------------------------------- messages


def _loads(value: Any, span: Span, key: str, strict: bool) -> Any:
    """Decode a JSON attribute; bad JSON raises ``ValueError`` when strict, else returns the raw string."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError as exc:
        if strict:
            raise ValueError(
                f"{_where(span, key)} is not valid JSON ({exc}); fix the instrumentation"
            ) from None
        return value


def _arguments_json(arguments: Any) -> str:
    if arguments is None:
        return "{}"
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _image_part(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """An OpenAI ``image_url`` part for an image in any accepted shape, or None if ``part`` is not one."""
    kind = part.get("type")
    if kind in _IMAGE_PART_TYPES:
        url = part.get("image_url", part.get("url"))
        if isinstance(url, Mapping):
            url = url.get("url")
        return {"type": "image_url", "image_url": {"url": url}} if isinstance(url, str) else None
    if part.get("modality") == "image" and kind == "uri" and isinstance(part.get("uri"), str):
        return {"type": "image_url", "image_url": {"url": part["uri"]}}
    if part.get("modality") == "image" and kind == "blob" and isinstance(part.get("content"), str):
        mime = part.get("mime_type") or "image/png"
        return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{part['content']}"}}
    return None


def _content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]] | None:
    """OpenAI message content: a string when every part is text, else the part list."""
    if not parts:
        return None
    if all(part["type"] == "text" for part in parts):
        return "".join(part["text"] for part in parts)
    return parts


def _from_genai(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """OpenAI messages for one GenAI "parts" message (tool responses become ``tool`` messages)."""
    role = str(message.get("role") or "user")
    content: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    tool_messages: list[dict[str, Any]] = []
    for part in message.get("parts") or []:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text":
            content.append({"type": "text", "text": str(part.get("content", ""))})
        elif kind == "tool_call":
            function = {"name": part.get("name"), "arguments": _arguments_json(part.get("arguments"))}
            calls.append({"id": part.get("id"), "type": "function", "function": function})
        elif kind == "tool_call_response":
            response = part.get("response")
            text = response if isinstance(response, str) else json.dumps(response)
            tool_messages.append({"role": "tool", "tool_call_id": part.get("id"), "content": text})
        elif (image := _image_part(part)) is not None:
            content.append(image)
    out = list(tool_messages)
    if content or calls or not tool_messages:
        converted: dict[str, Any] = {"role": role, "content": _content(content)}
        if calls:
            converted["tool_calls"] = calls
        out.append(converted)
    return out


def _legacy_content(content: Any) -> Any:
    """Content of an Agent Lightning 0.3 message: JSON-encoded part lists are decoded."""
    if isinstance(content, str) and content.startswith("["):
        try:
            decoded = json.loads(content)
        except ValueError:
            return content
        if isinstance(decoded, list) and all(isinstance(p, Mapping) and "type" in p for p in decoded):
            return [_image_part(p) or dict(p) for p in decoded]
    if isinstance(content, list):
        return [_image_part(p) or dict(p) if isinstance(p, Mapping) else p for p in content]
    return content


def _legacy_tool_call(call: Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(call.get("function"), Mapping):
        function = dict(call["function"])
        function["arguments"] = _arguments_json(function.get("arguments"))
    else:
        function = {"name": call.get("name"), "arguments": _arguments_json(call.get("arguments"))}
    return {"id": call.get("id"), "type": call.get("type") or "function", "function": function}


def _from_openai_like(message: Mapping[str, Any]) -> dict[str, Any]:
    """Normalize an OpenAI-style (Agent Lightning 0.3) message dict."""
    out: dict[str, Any] = {"role": str(message.get("role") or "user")}
    content = message.get("content")
    out["content"] = _legacy_content(content) if content is not None else None
    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, list) and tool_calls:
        out["tool_calls"] = [_legacy_tool_call(call) for call in tool_calls if isinstance(call, Mapping)]
    if message.get("tool_call_id") is not None:
        out["tool_call_id"] = message["tool_call_id"]
    return out


def _to_openai(messages: Any, span: Span, key: str, strict: bool) -> list[dict[str, Any]] | None:
    """Convert a decoded message list (GenAI parts or OpenAI-like) to OpenAI messages."""
    if isinstance(messages, Mapping):  # 0.3 completions are sometimes a single message dict
        messages = [messages]
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        if strict:
            raise ValueError(
                f"{_where(span, key)} must be a list of message objects, got {type(messages).__name__}"
            )
        return None
    out: list[dict[str, Any]] = []
    for message in messages:
        out.extend(_from_genai(message) if "parts" in message else [_from_openai_like(message)])
    return out


def _messages(span: Span, keys: tuple[str, ...], strict: bool) -> list[dict[str, Any]] | None:
    for key in keys:
        value = unflatten_prefix(span.attributes, key)
        if value is not None:
            return _to_openai(_loads(value, span, key, strict), span, key, strict)
    return None


def prompt_messages(span: Span, *, strict: bool = False) -> list[dict[str, Any]] | None:
    """The call's input as OpenAI chat messages (system instructions first), or None if not recorded.

    With ``strict``, a malformed attribute raises ``ValueError`` naming the span and key; otherwise
    it is treated as absent.
    """
    keys = (GEN_AI_INPUT_MESSAGES, "gen_ai.prompt", "agentlightning.operation.input.messages")
    messages = _messages(span, keys, strict)
    system = span.attributes.get("gen_ai.system_instructions")
    if isinstance(system, str):
        parts = _loads(system, span, "gen_ai.system_instructions", strict)
        if isinstance(parts, list):
            head = _from_genai({"role": "system", "parts": parts})
            messages = head + (messages or [])
    return messages


def completion_messages(span: Span, *, strict: bool = False) -> list[dict[str, Any]] | None:
    """The call's output choices as OpenAI assistant messages, or None if not recorded."""
    keys = (GEN_AI_OUTPUT_MESSAGES, "gen_ai.completion", "agentlightning.operation.output.choices")
    messages = _messages(span, keys, strict)
    if messages is not None:
        # 0.3 operation output stores whole choices: {"message": {...}, "finish_reason": ...}
        messages = [
            _from_openai_like(m["message"]) if isinstance(m.get("message"), Mapping) else m for m in messages
        ]
    return messages


def request_tools(span: Span, *, strict: bool = False) -> list[dict[str, Any]] | None:
    """The tools offered to the model, in OpenAI format (``{"type": "function", "function": {...}}``)."""
    for key in (GEN_AI_REQUEST_TOOLS, "gen_ai.tool.definitions", "gen_ai.request.functions"):
        value = unflatten_prefix(span.attributes, key)
        if value is None:
            continue
        value = _loads(value, span, key, strict)
        if not isinstance(value, list):
            if strict:
                raise ValueError(f"{_where(span, key)} must be a list of tools, got {type(value).__name__}")
            return None
        tools: list[dict[str, Any]] = []
        for tool in value:
            if not isinstance(tool, Mapping):
                continue
            function = dict(tool["function"]) if isinstance(tool.get("function"), Mapping) else dict(tool)
            function.pop("type", None)
            if isinstance(function.get("parameters"), str):
                function["parameters"] = _loads(function["parameters"], span, key, strict)
            tools.append({"type": "function", "function": function})
        return tools
    return None


def image_urls(messages: list[dict[str, Any]] | None) -> list[str]:
    """URLs (or data URLs) of every image in OpenAI-format messages, in order."""
    urls: list[str] = []
    for message in messages or []:
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                if isinstance(part, Mapping) and part.get("type") == "image_url":
                    url = part.get("image_url")
                    url = url.get("url") if isinstance(url, Mapping) else url
                    if isinstance(url, str):
                        urls.append(url)
    return urls


def llm_call_pattern(pattern: str | re.Pattern[str]) -> re.Pattern[str]:
    """Compile an ``llm_call_match``/``agent_match`` regex, with a clear error when it is invalid."""
    if isinstance(pattern, re.Pattern):
        return pattern
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"Invalid regular expression {pattern!r}: {exc}") from None
