"""Anthropic Messages API <-> chat completions, so a chat-only backend serves ``/v1/messages`` clients.

Requests: ``system`` becomes a system message; ``text`` and ``image`` blocks become chat content parts
(base64 images as ``data:`` URLs); ``tool_use`` blocks become the assistant's ``tool_calls`` (arguments as
the JSON of ``input``); ``tool_result`` blocks become ``tool`` messages placed right after the calls
(images inside a result follow as a user message); ``thinking`` blocks are dropped. Tools map to function
tools, ``tool_choice`` auto/any/tool/none to auto/required/function/none,
``disable_parallel_tool_use`` to ``parallel_tool_calls: false``, ``stop_sequences`` to ``stop``.
Anthropic's server tools (``web_search``, ``bash`` ...) are refused with a 400.

Responses: reasoning, text and tool calls become ``thinking``, ``text`` and ``tool_use`` blocks (tool
arguments that are not a JSON object are passed as ``{"_raw_arguments": "<text>"}``); finish reasons
map to ``end_turn``/``stop_sequence``/``max_tokens``/``tool_use``/``refusal``. Errors use Anthropic's
``{"type": "error", "error": {"type", "message"}}`` body. Streams are translated chunk by chunk into
``message_start`` ... ``message_stop`` by :class:`MessagesStream`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from agl_core.llm_proxy import _json
from agl_core.llm_proxy.errors import ProxyHTTPError
from agl_proxy_translate.translation import Translation

__all__ = ["MessagesStream", "anthropic_error_body", "chat_to_message", "messages_to_chat"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def anthropic_error_body(status: int, message: str) -> dict[str, Any]:
    """Anthropic's error body for an HTTP ``status``."""
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def _bad(message: str, param: str | None = None) -> ProxyHTTPError:
    return ProxyHTTPError(400, message, param=param)


def _image_part(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    source = block.get("source") or {}
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    elif source.get("type") == "url" and isinstance(source.get("url"), str):
        url = source["url"]
    else:
        raise _bad(f"{where}: an image needs a base64 or url source.", param="messages")
    return {"type": "image_url", "image_url": {"url": url}}


def _parts_content(parts: list[dict[str, Any]]) -> Any:
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _tool_result(block: Mapping[str, Any], where: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A ``tool`` message for a ``tool_result`` block, and image parts that must follow as a user turn."""
    content = block.get("content")
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for inner in content:
            kind = inner.get("type") if isinstance(inner, dict) else None
            if kind == "text":
                texts.append(inner.get("text", ""))
            elif kind == "image":
                images.append(_image_part(inner, where))
            else:
                raise _bad(f"{where}: tool_result content type {kind!r} is not supported.", param="messages")
    tool_use_id = block.get("tool_use_id")
    if not isinstance(tool_use_id, str):
        raise _bad(f"{where}: a tool_result needs 'tool_use_id'.", param="messages")
    return {"role": "tool", "tool_call_id": tool_use_id, "content": "".join(texts)}, images


def _system_content(content: Any, where: str) -> str:
    """The text of a system prompt: a string or a list of text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "\n".join(str(b.get("text", "")) for b in content)
    raise _bad(f"'{where}' must be a string or a list of text blocks.", param=where.partition("[")[0])


def _message(message: Any, position: int, notes: Translation) -> list[dict[str, Any]]:
    where = f"messages[{position}]"
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant", "system"):
        raise _bad(f"{where} must be an object with role 'user', 'assistant' or 'system'.", param="messages")
    role, content = message["role"], message.get("content")
    if role == "system":  # a system message inside the conversation (Claude Code sends one)
        return [{"role": "system", "content": _system_content(content, where)}]
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise _bad(f"{where}.content must be a string or a list of content blocks.", param="messages")
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    trailing_images: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append({"type": "text", "text": block.get("text", "")})
        elif kind == "image":
            parts.append(_image_part(block, where))
        elif kind == "tool_use" and role == "assistant":
            arguments = _json.dumps_str(block.get("input") if block.get("input") is not None else {})
            calls.append(
                {
                    "id": block.get("id"),
                    "type": "function",
                    "function": {"name": block.get("name"), "arguments": arguments},
                }
            )
        elif kind == "tool_result" and role == "user":
            tool_message, images = _tool_result(block, where)
            out.append(tool_message)
            trailing_images.extend(images)
        elif kind in ("thinking", "redacted_thinking"):
            notes.drop(f"messages[].{kind}: earlier thinking is not sent to a chat backend")
        else:
            raise _bad(
                f"{where}: content block type {kind!r} is not supported in a {role} message by the agl proxy "
                "(text, image, tool_use, tool_result and thinking are).",
                param="messages",
            )
    parts = trailing_images + parts
    if role == "assistant":
        if parts or calls:
            turn: dict[str, Any] = {"role": "assistant", "content": _parts_content(parts) if parts else None}
            if calls:
                turn["tool_calls"] = calls
            out.append(turn)
    elif parts:
        out.append({"role": "user", "content": _parts_content(parts)})
    return out


def _tools(tools: Any, notes: Translation) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise _bad("'tools' must be a list.", param="tools")
    out = []
    for position, tool in enumerate(tools):
        if (
            not isinstance(tool, dict)
            or tool.get("type") not in (None, "custom")
            or not isinstance(tool.get("name"), str)
        ):
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise _bad(
                f"Tool type {kind!r} is an Anthropic server tool the agl proxy cannot run; only custom tools "
                "(name, description, input_schema) are supported.",
                param="tools",
            )
        if tool.get("defer_loading") is True:  # loaded on demand by the API's tool search: not shown
            notes.drop(f"tools[{position}]: {tool['name']} (defer_loading)")
            continue
        function: dict[str, Any] = {
            "name": tool["name"],
            "parameters": tool.get("input_schema") or {"type": "object"},
        }
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return out


# Request fields the translation carries over (the others are listed as dropped).
_HANDLED = frozenset(
    {
        "model",
        "messages",
        "system",
        "max_tokens",
        "tools",
        "tool_choice",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "stream",
    }
)


def _output_format(config: Any, notes: Translation) -> dict[str, Any] | None:
    """``output_config.format`` (structured outputs) as a chat ``response_format``; the rest is listed."""
    if not isinstance(config, dict):
        notes.drop("output_config")
        return None
    response_format = None
    for key, value in config.items():
        if key == "format" and isinstance(value, dict) and value.get("type") == "json_schema":
            schema = {"name": "output", "schema": value.get("schema") or {}}
            response_format = {"type": "json_schema", "json_schema": schema}
        elif value is not None:
            notes.drop(f"output_config.{key}")
    return response_format


def messages_to_chat(payload: Mapping[str, Any], notes: Translation | None = None) -> dict[str, Any]:
    """The chat-completions request equivalent to an Anthropic Messages request.

    ``notes`` (a fresh :class:`Translation` when None) receives the fields that were not carried over.

    Raises:
        ProxyHTTPError: 400 naming what is missing or cannot be translated.
    """
    notes = notes if notes is not None else Translation()
    max_tokens = payload.get("max_tokens")
    if type(max_tokens) is not int or max_tokens < 1:
        raise _bad("'max_tokens' is required and must be a positive integer.", param="max_tokens")
    raw = payload.get("messages")
    if not isinstance(raw, list) or not raw:
        raise _bad("'messages' is required and must be a non-empty list.", param="messages")
    messages: list[dict[str, Any]] = []
    system = payload.get("system")
    if system is not None and system != "":
        messages.append({"role": "system", "content": _system_content(system, "system")})
    for position, message in enumerate(raw):
        messages.extend(_message(message, position, notes))
    chat: dict[str, Any] = {"model": payload["model"], "messages": messages, "max_tokens": max_tokens}
    if payload.get("tools"):
        tools = _tools(payload["tools"], notes)
        if tools:
            chat["tools"] = tools
    choice = payload.get("tool_choice")
    if isinstance(choice, dict):
        kind = choice.get("type")
        if kind == "auto":
            chat["tool_choice"] = "auto"
        elif kind == "any":
            chat["tool_choice"] = "required"
        elif kind == "none":
            chat["tool_choice"] = "none"
        elif kind == "tool" and isinstance(choice.get("name"), str):
            chat["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        else:
            raise _bad(f"tool_choice {choice!r} is not supported.", param="tool_choice")
        if choice.get("disable_parallel_tool_use") is True and kind != "none":
            chat["parallel_tool_calls"] = False
    for key in ("temperature", "top_p", "top_k"):
        if payload.get(key) is not None:
            chat[key] = payload[key]
    if payload.get("stop_sequences"):
        chat["stop"] = payload["stop_sequences"]
    for key, value in payload.items():
        if key == "output_config" and value is not None:
            response_format = _output_format(value, notes)
            if response_format is not None:
                chat["response_format"] = response_format
        elif key not in _HANDLED and value is not None:
            notes.drop(key)
    if payload.get("stream") is True:
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    return chat


# ---------------------------------------------------------------------------------------------- responses


def _base_id(chat: Mapping[str, Any]) -> str:
    ident = chat.get("id")
    if isinstance(ident, str) and ident:
        return ident.removeprefix("chatcmpl-")
    return os.urandom(12).hex()


def _stop(finish_reason: Any, stop_reason: Any, request: Mapping[str, Any]) -> tuple[str, str | None]:
    """Anthropic's ``stop_reason`` and ``stop_sequence`` for a chat finish reason."""
    if finish_reason in ("tool_calls", "function_call"):
        return "tool_use", None
    if finish_reason == "length":
        return "max_tokens", None
    if finish_reason == "content_filter":
        return "refusal", None
    sequences = request.get("stop_sequences") or ()
    if isinstance(stop_reason, str) and stop_reason in sequences:
        return "stop_sequence", stop_reason
    return "end_turn", None


def _usage(usage: Any) -> dict[str, Any]:
    usage = usage if isinstance(usage, dict) else {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return {
        "input_tokens": (usage.get("prompt_tokens") or 0) - cached,
        "output_tokens": usage.get("completion_tokens") or 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
    }


def _input(arguments: Any) -> dict[str, Any]:
    """A tool call's ``input``: its arguments as a JSON object, else ``{"_raw_arguments": text}``."""
    if not isinstance(arguments, str) or not arguments.strip():
        return {}
    try:
        parsed = _json.loads(arguments)
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"_raw_arguments": arguments}


def _message_envelope(ident: str, model: Any, request: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": f"msg_{ident}",
        "type": "message",
        "role": "assistant",
        "model": model if isinstance(model, str) else request.get("model"),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": _usage(None),
    }


def chat_to_message(
    chat: Mapping[str, Any], request: Mapping[str, Any], notes: Translation | None = None
) -> dict[str, Any]:
    """The Anthropic ``message`` for a ``chat.completion`` (its first choice)."""
    out = _message_envelope(_base_id(chat), chat.get("model"), request)
    choices = chat.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    blocks: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        blocks.append({"type": "thinking", "thinking": reasoning, "signature": ""})
    content = message.get("content")
    if isinstance(content, str) and content:
        blocks.append({"type": "text", "text": content})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id"),
                "name": function.get("name"),
                "input": _input(function.get("arguments")),
            }
        )
    out["content"] = blocks
    out["stop_reason"], out["stop_sequence"] = _stop(
        choice.get("finish_reason"), choice.get("stop_reason"), request
    )
    out["usage"] = _usage(chat.get("usage"))
    return out


# ---------------------------------------------------------------------------------------------- streams


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + _json.dumps({"type": kind, **payload}) + b"\n\n"


class MessagesStream:
    """Turns a stream of ``chat.completion.chunk`` dicts into Anthropic Messages events (SSE bytes).

    Feed chunks with :meth:`feed`, then call :meth:`finish` (or :meth:`fail`). Only the first choice is
    translated. ``message_start`` carries zero usage (a chat stream reports usage only at its end); the
    real counts come in ``message_delta``.
    """

    def __init__(self, request: Mapping[str, Any], notes: Translation | None = None) -> None:
        self._request = request
        self._started = False
        self._blocks = 0
        self._open: tuple[str, int] | None = None  # (kind, block index) receiving deltas
        self._calls: dict[int, int] = {}  # chat tool-call index -> block index
        self._held: dict[int, dict[str, str]] = {}  # calls waiting for the live one to end
        self._live_call: int | None = None
        self._finish: Any = None
        self._stop_reason: Any = None
        self._usage: Any = None

    def _start(self, chunk: Mapping[str, Any]) -> list[bytes]:
        self._started = True
        message = _message_envelope(_base_id(chunk), chunk.get("model"), self._request)
        return [_event("message_start", {"message": message})]

    def _close(self) -> list[bytes]:
        if self._open is None:
            return []
        index = self._open[1]
        self._open = None
        return [_event("content_block_stop", {"index": index})]

    def _open_block(self, kind: str, block: dict[str, Any]) -> list[bytes]:
        events = self._close()
        self._live_call = None
        index = self._blocks
        self._blocks += 1
        self._open = (kind, index)
        events.append(_event("content_block_start", {"index": index, "content_block": block}))
        return events

    def _tool_call(self, call: Mapping[str, Any], position: int) -> list[bytes]:
        """Stream the first tool call live; hold later ones until the live one is done.

        Anthropic streams one content block at a time, while a chat stream may interleave the argument
        pieces of parallel calls; held calls are sent whole, in order, when the stream moves on.
        """
        key = call.get("index", position)
        function = call.get("function") or {}
        held = self._held.get(key)
        if key not in self._calls and held is None:
            held = {"id": call.get("id") or f"toolu_{os.urandom(8).hex()}", "name": "", "arguments": ""}
            self._held[key] = held
            if self._live_call is None:
                return self._start_call(key, function)
        arguments = function.get("arguments")
        if key == self._live_call:
            if not isinstance(arguments, str) or not arguments:
                return []
            delta = {"type": "input_json_delta", "partial_json": arguments}
            return [_event("content_block_delta", {"index": self._calls[key], "delta": delta})]
        if held is not None:
            held["name"] += function.get("name") or ""
            held["arguments"] += arguments if isinstance(arguments, str) else ""
        return []

    def _start_call(self, key: int, function: Mapping[str, Any]) -> list[bytes]:
        held = self._held.pop(key)
        block: dict[str, Any] = {
            "type": "tool_use",
            "id": held["id"],
            "name": function.get("name") or held["name"],
            "input": {},
        }
        events = self._open_block("tool_use", block)
        self._calls[key] = self._blocks - 1
        self._live_call = key
        arguments = held["arguments"] + (function.get("arguments") or "")
        if arguments:
            delta = {"type": "input_json_delta", "partial_json": arguments}
            events.append(_event("content_block_delta", {"index": self._calls[key], "delta": delta}))
        return events

    def _flush_held(self) -> list[bytes]:
        """Send the held tool calls whole, in index order."""
        events: list[bytes] = []
        for key in sorted(self._held):
            held = self._held[key]
            events.extend(self._start_call(key, {"name": held["name"]}))
        return events

    def feed(self, chunk: Mapping[str, Any]) -> bytes:
        """The events for one chat chunk (possibly none)."""
        events = [] if self._started else self._start(chunk)
        if isinstance(chunk.get("usage"), dict):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                if self._open is None or self._open[0] != "thinking":
                    events.extend(
                        self._open_block("thinking", {"type": "thinking", "thinking": "", "signature": ""})
                    )
                index = self._open[1] if self._open else 0
                events.append(
                    _event(
                        "content_block_delta",
                        {"index": index, "delta": {"type": "thinking_delta", "thinking": reasoning}},
                    )
                )
            text = delta.get("content")
            if isinstance(text, str) and text:
                if self._open is None or self._open[0] != "text":
                    events.extend(self._open_block("text", {"type": "text", "text": ""}))
                index = self._open[1] if self._open else 0
                events.append(
                    _event(
                        "content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": text}}
                    )
                )
            for position, call in enumerate(delta.get("tool_calls") or ()):
                if isinstance(call, dict):
                    events.extend(self._tool_call(call, position))
            if choice.get("finish_reason") is not None:
                self._finish = choice["finish_reason"]
            if choice.get("stop_reason") is not None:
                self._stop_reason = choice["stop_reason"]
        return b"".join(events)

    def finish(self) -> bytes:
        """The closing events: the open block stopped, ``message_delta`` and ``message_stop``."""
        events = [] if self._started else self._start({})
        events.extend(self._flush_held())
        events.extend(self._close())
        stop_reason, stop_sequence = _stop(self._finish, self._stop_reason, self._request)
        usage = _usage(self._usage)
        delta = {"delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence}, "usage": usage}
        events.append(_event("message_delta", delta))
        events.append(_event("message_stop", {}))
        return b"".join(events)

    def fail(self, message: str, code: str) -> bytes:
        """The event ending a stream the backend broke off: Anthropic's ``error`` event."""
        events = [] if self._started else self._start({})
        events.append(_event("error", {"error": {"type": "api_error", "message": f"{message} ({code})"}}))
        return b"".join(events)
