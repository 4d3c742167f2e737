"""OpenAI requests and responses as OpenTelemetry GenAI "parts" messages and tool definitions.

Current semantic conventions: ``gen_ai.input.messages`` / ``gen_ai.output.messages`` are JSON lists of
``{"role", "parts": [...]}`` (output messages add ``finish_reason``); parts are ``text``, ``tool_call``
(``id``, ``name``, ``arguments`` as a JSON value), ``tool_call_response`` (``id``, ``response``) and
``uri`` / ``blob`` for images; ``gen_ai.system_instructions`` is a list of parts;
``gen_ai.tool.definitions`` a list of ``{"type": "function", "name", "description", "parameters"}``.
Covers chat completions, text completions and the Responses API (its ``input`` items and ``output``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "chat_input_messages",
    "chat_output_messages",
    "plain",
    "responses_finish_reason",
    "responses_input_messages",
    "responses_output_messages",
    "text_message",
    "tool_definitions",
]


def _role(value: Any, default: str) -> str:
    """A role as sent on the wire: an enum member (smolagents' ``MessageRole``) by its value, not its repr."""
    value = getattr(value, "value", value)
    return str(value) if value else default


def plain(value: Any) -> Any:
    """``value`` as JSON-ready data: pydantic models dumped, mappings and sequences walked."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True, warnings=False)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def _arguments(raw: Any) -> Any:
    """Tool-call arguments as a JSON value when they parse, else the raw string."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _image_part(url: Any) -> dict[str, Any] | None:
    if isinstance(url, Mapping):
        url = url.get("url")
    if not isinstance(url, str):
        return None
    return {"type": "uri", "modality": "image", "uri": url, "mime_type": None}


def _content_parts(content: Any) -> list[dict[str, Any]]:
    """Parts of an OpenAI content value: a string, or a list of text / image parts (chat or Responses)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text") and isinstance(part.get("text"), str):
            parts.append({"type": "text", "content": part["text"]})
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            parts.append({"type": "text", "content": part["refusal"]})
        elif kind in ("image_url", "input_image"):
            image = _image_part(part.get("image_url"))
            if image is not None:
                parts.append(image)
    return parts


def text_message(role: str, text: str, finish_reason: str | None = None) -> dict[str, Any]:
    """One message of a single text part (``finish_reason`` added for output messages)."""
    message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": text}]}
    if finish_reason is not None:
        message["finish_reason"] = finish_reason
    return message


def _tool_call_part(call: Mapping[str, Any]) -> dict[str, Any]:
    function = call.get("function") if isinstance(call.get("function"), Mapping) else call
    assert isinstance(function, Mapping)
    return {
        "type": "tool_call",
        "id": call.get("id") or call.get("call_id"),
        "name": function.get("name"),
        "arguments": _arguments(function.get("arguments")),
    }


def chat_input_messages(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """Chat-completions ``messages`` (dicts or models) as GenAI input messages."""
    out: list[dict[str, Any]] = []
    for raw in messages:
        message = plain(raw)
        if not isinstance(message, Mapping):
            continue
        role = _role(message.get("role"), "user")
        if role == "tool":
            response = message.get("content")
            if isinstance(response, list):
                response = "".join(p["content"] for p in _content_parts(response) if p["type"] == "text")
            parts = [{"type": "tool_call_response", "id": message.get("tool_call_id"), "response": response}]
        else:
            parts = _content_parts(message.get("content"))
            parts += [_tool_call_part(c) for c in message.get("tool_calls") or [] if isinstance(c, Mapping)]
        out.append({"role": role, "parts": parts})
    return out


def chat_output_messages(choices: Iterable[Any]) -> list[dict[str, Any]]:
    """The choices of a chat completion as GenAI output messages."""
    out: list[dict[str, Any]] = []
    for raw in choices:
        choice = plain(raw)
        message = choice.get("message") or {}
        parts = _content_parts(message.get("content"))
        parts += [_tool_call_part(c) for c in message.get("tool_calls") or [] if isinstance(c, Mapping)]
        out.append(
            {
                "role": message.get("role") or "assistant",
                "parts": parts,
                "finish_reason": choice.get("finish_reason"),
            }
        )
    return out


def tool_definitions(tools: Iterable[Any]) -> list[dict[str, Any]]:
    """Request tools (chat ``{"type": "function", "function": {...}}`` or Responses' flat form), semconv."""
    out: list[dict[str, Any]] = []
    for raw in tools:
        tool = plain(raw)
        if not isinstance(tool, Mapping):
            continue
        function = tool.get("function")
        if isinstance(function, Mapping):
            out.append({"type": tool.get("type") or "function", **function})
        else:
            out.append(dict(tool))
    return out


def responses_input_messages(value: Any) -> list[dict[str, Any]]:
    """A Responses ``input`` (a string or a list of items) as GenAI input messages.

    Message items keep their role; ``function_call`` items become assistant ``tool_call`` parts (merged
    into the preceding assistant message) and ``function_call_output`` items ``tool`` messages.
    """
    if isinstance(value, str):
        return [text_message("user", value)]
    out: list[dict[str, Any]] = []
    for raw in value if isinstance(value, list) else []:
        item = plain(raw)
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type", "message")
        if kind == "message" or (kind is None and "role" in item):
            out.append(
                {"role": _role(item.get("role"), "user"), "parts": _content_parts(item.get("content"))}
            )
        elif kind == "function_call":
            part = _tool_call_part(item)
            if out and out[-1]["role"] == "assistant":
                out[-1]["parts"].append(part)
            else:
                out.append({"role": "assistant", "parts": [part]})
        elif kind == "function_call_output":
            output = item.get("output")
            response = output if isinstance(output, str) else json.dumps(output)
            out.append(
                {
                    "role": "tool",
                    "parts": [
                        {"type": "tool_call_response", "id": item.get("call_id"), "response": response}
                    ],
                }
            )
    return out


def responses_finish_reason(response: Mapping[str, Any]) -> str:
    """A chat-style finish reason for a Responses result: ``tool_calls``, ``length`` or ``stop``."""
    if any(isinstance(i, Mapping) and i.get("type") == "function_call" for i in response.get("output") or []):
        return "tool_calls"
    details = response.get("incomplete_details")
    if isinstance(details, Mapping) and details.get("reason") == "max_output_tokens":
        return "length"
    status = response.get("status")
    return "stop" if status in (None, "completed") else str(status)


def responses_output_messages(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A Responses result's ``output`` items as one GenAI assistant output message."""
    parts: list[dict[str, Any]] = []
    for item in response.get("output") or []:
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "message":
            parts += _content_parts(item.get("content"))
        elif item.get("type") == "function_call":
            parts.append(_tool_call_part(item))
    return [{"role": "assistant", "parts": parts, "finish_reason": responses_finish_reason(response)}]
