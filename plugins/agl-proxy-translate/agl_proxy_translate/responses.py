"""OpenAI Responses API <-> chat completions, so a chat-only backend serves ``/v1/responses`` clients.

Requests: ``instructions`` becomes a system message; ``input`` items become chat messages (``message``
items with text and image parts, ``function_call`` items as the assistant's ``tool_calls`` — consecutive
calls form one parallel turn — and ``function_call_output`` items as ``tool`` messages; ``reasoning``
items are dropped); function tools, ``tool_choice``, ``parallel_tool_calls``, ``max_output_tokens``,
sampling parameters, ``reasoning.effort``, logprobs (``include: ["message.output_text.logprobs"]``) and
``text.format`` map to their chat equivalents. What a stateless translation cannot honour
(``previous_response_id``, ``conversation``, hosted tools such as ``web_search``) is refused with a 400
that says so.

Responses: reasoning, text and tool calls become ``reasoning``, ``message`` and ``function_call`` output
items; ``finish_reason: length`` becomes ``status: "incomplete"``; usage is renamed. Streams are
translated chunk by chunk into the Responses event sequence (``response.created`` ...
``response.completed``) by :class:`ResponsesStream`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from agl_core.llm_proxy import _json
from agl_core.llm_proxy.errors import ProxyHTTPError
from agl_proxy_translate.translation import CUSTOM_INPUT, Translation

__all__ = ["ResponsesStream", "chat_to_response", "responses_to_chat"]

_SAMPLING_KEYS = ("temperature", "top_p", "parallel_tool_calls", "user", "seed", "top_k")
_LOGPROBS_INCLUDE = "message.output_text.logprobs"


def _bad(message: str, param: str | None = None) -> ProxyHTTPError:
    return ProxyHTTPError(400, message, param=param)


def _content(content: Any, where: str) -> Any:
    """Chat content of a Responses message content: a string, or chat parts for text and images."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad(f"{where}.content must be a string or a list of content parts.", param="input")
    parts: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": part.get("text", "")})
        elif kind == "refusal":
            parts.append({"type": "text", "text": part.get("refusal", "")})
        elif kind == "input_image":
            url = part.get("image_url")
            if not isinstance(url, str):
                raise _bad(
                    f"{where}: an input_image needs an 'image_url' (a URL or a data: URL); file ids need the "
                    "Files API, which the agl proxy does not serve.",
                    param="input",
                )
            image: dict[str, Any] = {"url": url}
            if isinstance(part.get("detail"), str):
                image["detail"] = part["detail"]
            parts.append({"type": "image_url", "image_url": image})
        else:
            raise _bad(
                f"{where}: content part type {kind!r} is not supported by the agl proxy "
                "(text and images are).",
                param="input",
            )
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _output_text(output: Any) -> Any:
    """A ``function_call_output``'s output as a tool message's content."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return _content(output, "function_call_output")
    return _json.dumps_str(output)


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _assistant_call(messages: list[dict[str, Any]], call: dict[str, Any]) -> None:
    """Add a tool call to the assistant turn in progress (consecutive calls form one parallel turn)."""
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(call)
    else:
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _messages(
    payload: Mapping[str, Any], notes: Translation, tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    instructions = payload.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages.append({"role": "system", "content": instructions})
    items = payload.get("input")
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
        return messages
    if not isinstance(items, list) or not items:
        raise _bad("'input' is required: a string or a non-empty list of input items.", param="input")
    for position, item in enumerate(items):
        where = f"input[{position}]"
        if not isinstance(item, dict):
            raise _bad(f"{where} must be an object.", param="input")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise _bad(f"{where}.role must be user, assistant, system or developer.", param="input")
            messages.append(
                {
                    "role": "system" if role == "developer" else role,
                    "content": _content(item.get("content"), where),
                }
            )
        elif kind in ("function_call", "custom_tool_call"):
            call_id, name = item.get("call_id"), item.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise _bad(f"{where}: a {kind} needs 'call_id' and 'name'.", param="input")
            namespace = item.get("namespace") if isinstance(item.get("namespace"), str) else None
            if kind == "function_call":
                flat = notes.chat_name(name, namespace, "function")
                arguments = item.get("arguments") or ""
            else:
                flat = notes.chat_name(name, namespace, "custom")
                arguments = _json.dumps_str({CUSTOM_INPUT: str(item.get("input") or "")})
            _assistant_call(messages, _call(call_id, flat, arguments))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = item.get("call_id")
            if not isinstance(call_id, str):
                raise _bad(f"{where}: a {kind} needs 'call_id'.", param="input")
            messages.append(
                {"role": "tool", "tool_call_id": call_id, "content": _output_text(item.get("output"))}
            )
        elif kind == "additional_tools":  # tools the client adds mid-conversation (Codex)
            tools.extend(_tools(item.get("tools") or [], notes, f"{where}.tools"))
        elif kind == "reasoning":
            notes.drop("input[].reasoning: earlier reasoning is not sent to a chat backend")
        else:
            raise _bad(
                f"{where}: input item type {kind!r} is not supported by the agl proxy (message, "
                "function_call, custom_tool_call, their outputs, additional_tools and reasoning are).",
                param="input",
            )
    return messages


_HOSTED_TOOL_HINT = "a hosted tool the agl proxy cannot run (a chat-completions backend serves the request)"


def _custom_function(tool: Mapping[str, Any], name: str) -> dict[str, Any]:
    """A free-form ``custom`` tool as a function taking its whole input as one string."""
    description = tool.get("description") if isinstance(tool.get("description"), str) else ""
    fmt = tool.get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "grammar" and isinstance(fmt.get("definition"), str):
        syntax = fmt.get("syntax") or "grammar"
        description = (
            f"{description}\n\nThe input follows this {syntax} grammar:\n{fmt['definition']}".strip()
        )
    parameters = {
        "type": "object",
        "properties": {CUSTOM_INPUT: {"type": "string", "description": "The tool's whole input, verbatim."}},
        "required": [CUSTOM_INPUT],
        "additionalProperties": False,
    }
    function: dict[str, Any] = {"name": name, "parameters": parameters}
    if description:
        function["description"] = description
    return function


def _tools(
    tools: Any, notes: Translation, where: str = "tools", namespace: str | None = None
) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise _bad(f"'{where}' must be a list.", param="tools")
    out: list[dict[str, Any]] = []
    for position, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, dict) else None
        name = tool.get("name") if isinstance(tool, dict) else None
        if kind in ("function", "custom", "namespace") and not isinstance(name, str):
            raise _bad(f"{where}[{position}]: a {kind} tool needs a 'name'.", param="tools")
        assert isinstance(tool, dict) or kind is None
        if kind == "function":
            function = {
                key: tool[key] for key in ("description", "parameters", "strict") if tool.get(key) is not None
            }
            function["name"] = notes.chat_name(str(name), namespace, "function")
            out.append({"type": "function", "function": function})
        elif kind == "custom":
            flat = notes.chat_name(str(name), namespace, "custom")
            out.append({"type": "function", "function": _custom_function(tool, flat)})
        elif kind == "namespace" and namespace is None:
            out.extend(_tools(tool.get("tools") or [], notes, f"{where}[{position}].tools", str(name)))
        elif notes.refuse_hosted_tools or kind is None or kind == "namespace":
            raise _bad(f"{where}[{position}]: tool type {kind!r} is {_HOSTED_TOOL_HINT}.", param="tools")
        else:
            notes.drop(f"{where}[{position}]: hosted tool {kind!r} ({_HOSTED_TOOL_HINT})")
    return out


def _tool_choice(choice: Any, notes: Translation) -> Any:
    if isinstance(choice, str):
        return choice
    if (
        isinstance(choice, dict)
        and choice.get("type") in ("function", "custom")
        and isinstance(choice.get("name"), str)
    ):
        namespace = choice.get("namespace") if isinstance(choice.get("namespace"), str) else None
        name = notes.chat_name(choice["name"], namespace, choice["type"])
        return {"type": "function", "function": {"name": name}}
    raise _bad(
        f"tool_choice {choice!r} is not supported; use auto, none, required or a function.",
        param="tool_choice",
    )


def _response_format(text: Any) -> dict[str, Any] | None:
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") in (None, "text"):
        return None
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    if fmt.get("type") == "json_schema":
        schema = {key: fmt[key] for key in ("name", "schema", "strict", "description") if key in fmt}
        return {"type": "json_schema", "json_schema": schema}
    raise _bad(f"text.format type {fmt.get('type')!r} is not supported.", param="text")


# Request fields the translation carries over (the others are listed as dropped).
_HANDLED = frozenset(
    {"model", "input", "instructions", "tools", "tool_choice", "max_output_tokens", "top_logprobs", "stream"}
    | set(_SAMPLING_KEYS)
)


def _note_dropped(payload: Mapping[str, Any], notes: Translation) -> None:
    for key, value in payload.items():
        if value is None or key in _HANDLED:
            continue
        if key == "include":
            for entry in value if isinstance(value, list) else [value]:
                if entry != _LOGPROBS_INCLUDE:
                    notes.drop(f"include: {entry}")
        elif key == "reasoning" and isinstance(value, dict):
            continue  # below: effort is carried, the rest is listed
        elif key == "text" and isinstance(value, dict):
            for inner in value:
                if inner != "format":
                    notes.drop(f"text.{inner}")
        else:
            notes.drop(key)
    reasoning = payload.get("reasoning")
    if isinstance(reasoning, dict):
        for inner, value in reasoning.items():
            if inner != "effort" and value is not None:
                notes.drop(f"reasoning.{inner}")


def responses_to_chat(payload: Mapping[str, Any], notes: Translation | None = None) -> dict[str, Any]:
    """The chat-completions request equivalent to a Responses request.

    ``notes`` (a fresh :class:`Translation` when None) receives the dropped fields and renamed tools.

    Raises:
        ProxyHTTPError: 400 naming what cannot be translated.
    """
    notes = notes if notes is not None else Translation()
    for key in ("previous_response_id", "conversation", "prompt"):
        if payload.get(key) is not None:
            raise _bad(
                f"'{key}' needs server-side state, which the agl proxy does not keep; send the whole "
                "conversation in 'input' instead.",
                param=key,
            )
    tools = _tools(payload["tools"], notes) if payload.get("tools") else []
    chat: dict[str, Any] = {"model": payload["model"], "messages": _messages(payload, notes, tools)}
    if tools:
        chat["tools"] = tools
    if payload.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(payload["tool_choice"], notes)
    for key in _SAMPLING_KEYS:
        if payload.get(key) is not None:
            chat[key] = payload[key]
    if payload.get("max_output_tokens") is not None:
        chat["max_tokens"] = payload["max_output_tokens"]
    include = payload.get("include") or ()
    if _LOGPROBS_INCLUDE in include or payload.get("top_logprobs"):
        chat["logprobs"] = True
        if payload.get("top_logprobs"):
            chat["top_logprobs"] = payload["top_logprobs"]
    reasoning = payload.get("reasoning")
    if isinstance(reasoning, dict) and isinstance(reasoning.get("effort"), str):
        chat["reasoning_effort"] = reasoning["effort"]
    response_format = _response_format(payload.get("text"))
    if response_format is not None:
        chat["response_format"] = response_format
    if payload.get("stream") is True:
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    _note_dropped(payload, notes)
    return chat


# ---------------------------------------------------------------------------------------------- responses


def _base_id(chat: Mapping[str, Any]) -> str:
    ident = chat.get("id")
    if isinstance(ident, str) and ident:
        return ident.removeprefix("chatcmpl-")
    return os.urandom(12).hex()


def _usage(usage: Any) -> dict[str, Any] | None:
    if not isinstance(usage, dict):
        return None
    prompt = usage.get("prompt_tokens") or 0
    completion = usage.get("completion_tokens") or 0
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": usage.get("total_tokens") or prompt + completion,
    }


def _text_logprobs(logprobs: Any, request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Chat logprob entries as Responses ``output_text.logprobs`` (only when the client asked)."""
    if _LOGPROBS_INCLUDE not in (request.get("include") or ()) or not isinstance(logprobs, dict):
        return []
    out = []
    for entry in logprobs.get("content") or ():
        if isinstance(entry, dict):
            top = [
                {"token": t.get("token"), "bytes": t.get("bytes") or [], "logprob": t.get("logprob")}
                for t in entry.get("top_logprobs") or ()
                if isinstance(t, dict)
            ]
            out.append(
                {
                    "token": entry.get("token"),
                    "bytes": entry.get("bytes") or [],
                    "logprob": entry.get("logprob"),
                    "top_logprobs": top,
                }
            )
    return out


def _status(finish_reason: Any) -> tuple[str, dict[str, Any] | None]:
    if finish_reason == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    if finish_reason == "content_filter":
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


def envelope(
    request: Mapping[str, Any],
    ident: str,
    created: int,
    model: Any,
    output: list[dict[str, Any]],
    status: str,
    incomplete: dict[str, Any] | None,
    usage: dict[str, Any] | None,
) -> dict[str, Any]:
    """A ``response`` object around ``output``, echoing the request's settings as OpenAI does."""
    return {
        "id": f"resp_{ident}",
        "object": "response",
        "created_at": created,
        "status": status,
        "error": None,
        "incomplete_details": incomplete,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "model": model if isinstance(model, str) else request.get("model"),
        "output": output,
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "temperature": request.get("temperature"),
        "top_p": request.get("top_p"),
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools") or [],
        "text": request.get("text") or {"format": {"type": "text"}},
        "truncation": request.get("truncation") or "disabled",
        "metadata": request.get("metadata") or {},
        "store": False,
        "usage": usage,
    }


def _reasoning_item(ident: str, text: str) -> dict[str, Any]:
    return {
        "id": f"rs_{ident}",
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
        "status": "completed",
    }


def _message_item(
    ident: str, text: str, logprobs: list[dict[str, Any]], status: str = "completed"
) -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs}
    return {"id": f"msg_{ident}", "type": "message", "status": status, "role": "assistant", "content": [part]}


def _custom_input(arguments: str) -> str:
    """A custom tool's input from the one-string-argument function call the model made."""
    try:
        parsed = _json.loads(arguments)
    except ValueError:
        return arguments
    if isinstance(parsed, dict) and isinstance(parsed.get(CUSTOM_INPUT), str):
        return str(parsed[CUSTOM_INPUT])
    return arguments


def _call_item(
    call_id: str, name: str, arguments: str, status: str = "completed", notes: Translation | None = None
) -> dict[str, Any]:
    """The output item of a chat tool call, as the tool was declared (function, namespaced, custom)."""
    origin = (notes or Translation()).origin(name)
    item: dict[str, Any]
    if origin.kind == "custom":
        item = {
            "id": f"ctc_{call_id}",
            "type": "custom_tool_call",
            "status": status,
            "call_id": call_id,
            "name": origin.name,
            "input": _custom_input(arguments) if arguments else "",
        }
    else:
        item = {
            "id": f"fc_{call_id}",
            "type": "function_call",
            "status": status,
            "call_id": call_id,
            "name": origin.name,
            "arguments": arguments,
        }
    if origin.namespace is not None:
        item["namespace"] = origin.namespace
    return item


def chat_to_response(
    chat: Mapping[str, Any], request: Mapping[str, Any], notes: Translation | None = None
) -> dict[str, Any]:
    """The Responses ``response`` object for a ``chat.completion`` (its first choice).

    ``notes`` (from :func:`responses_to_chat`) maps renamed tools back to how the client declared them.
    """
    ident = _base_id(chat)
    choices = chat.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    output: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        output.append(_reasoning_item(ident, reasoning))
    content = message.get("content")
    if isinstance(content, str) and content:
        output.append(_message_item(ident, content, _text_logprobs(choice.get("logprobs"), request)))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        output.append(
            _call_item(
                str(call.get("id")),
                str(function.get("name")),
                function.get("arguments") or "",
                notes=notes,
            )
        )
    status, incomplete = _status(choice.get("finish_reason"))
    chat_created = chat.get("created")
    created = chat_created if isinstance(chat_created, int) else int(time.time())
    return envelope(
        request, ident, created, chat.get("model"), output, status, incomplete, _usage(chat.get("usage"))
    )


# ---------------------------------------------------------------------------------------------- streams


def _event(payload: dict[str, Any]) -> bytes:
    kind: str = payload["type"]
    return b"event: " + kind.encode() + b"\ndata: " + _json.dumps(payload) + b"\n\n"


class ResponsesStream:
    """Turns a stream of ``chat.completion.chunk`` dicts into Responses API events (SSE bytes).

    Feed chunks with :meth:`feed`, then call :meth:`finish` (or :meth:`fail` when the backend broke off).
    Only the first choice is translated.
    """

    def __init__(self, request: Mapping[str, Any], notes: Translation | None = None) -> None:
        self._request = request
        self._notes = notes or Translation()
        self._arguments: dict[int, list[str]] = {}  # chat tool-call index -> argument pieces
        self._sequence = 0
        self._ident: str | None = None
        self._created = int(time.time())
        self._model: Any = None
        self._items: list[dict[str, Any]] = []  # output items in the order they were opened
        self._open: dict[str, Any] | None = None  # the reasoning or message item receiving text
        self._texts: dict[int, list[str]] = {}
        self._calls: dict[int, dict[str, Any]] = {}  # chat tool-call index -> function_call item
        self._finish: Any = None
        self._usage: dict[str, Any] | None = None
        self._logprobs: list[dict[str, Any]] = []

    def _emit(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return _event(payload)

    def _response(self, status: str, output: list[dict[str, Any]], incomplete: Any = None) -> dict[str, Any]:
        return envelope(
            self._request,
            self._ident or "",
            self._created,
            self._model,
            output,
            status,
            incomplete,
            self._usage,
        )

    def _start(self, chunk: Mapping[str, Any]) -> list[bytes]:
        self._ident = _base_id(chunk)
        if isinstance(chunk.get("created"), int):
            self._created = chunk["created"]
        self._model = chunk.get("model")
        start = self._response("in_progress", [])
        return [
            self._emit("response.created", response=start),
            self._emit("response.in_progress", response=start),
        ]

    def _close_open(self) -> list[bytes]:
        item, self._open = self._open, None
        if item is None:
            return []
        index = self._items.index(item)
        text = "".join(self._texts.pop(index, []))
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        if item["type"] == "reasoning":
            item["content"] = [{"type": "reasoning_text", "text": text}]
            item["status"] = "completed"
            events = [self._emit("response.reasoning_text.done", **where, text=text)]
        else:
            logprobs = _text_logprobs({"content": self._logprobs}, self._request)
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs}
            item["content"], item["status"] = [part], "completed"
            events = [
                self._emit("response.output_text.done", **where, text=text, logprobs=logprobs),
                self._emit("response.content_part.done", **where, part=part),
            ]
        events.append(self._emit("response.output_item.done", output_index=index, item=item))
        return events

    def _text(self, kind: str, text: str, logprobs: Any) -> list[bytes]:
        events: list[bytes] = []
        item = self._open
        if item is None or item["type"] != kind:
            events.extend(self._close_open())
            ident = self._ident or ""
            item = (
                _reasoning_item(ident, "")
                if kind == "reasoning"
                else _message_item(ident, "", [], "in_progress")
            )
            item["content"], item["status"] = [], "in_progress"
            self._items.append(item)
            self._open = item
            index = len(self._items) - 1
            events.append(self._emit("response.output_item.added", output_index=index, item=dict(item)))
            if kind == "message":
                empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                events.append(
                    self._emit(
                        "response.content_part.added",
                        item_id=item["id"],
                        output_index=index,
                        content_index=0,
                        part=empty,
                    )
                )
        index = self._items.index(item)
        self._texts.setdefault(index, []).append(text)
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        if kind == "reasoning":
            events.append(self._emit("response.reasoning_text.delta", **where, delta=text))
        else:
            entries = logprobs.get("content") if isinstance(logprobs, dict) else None
            if isinstance(entries, list):
                self._logprobs.extend(entries)
            delta_logprobs = _text_logprobs({"content": entries or []}, self._request)
            events.append(
                self._emit("response.output_text.delta", **where, delta=text, logprobs=delta_logprobs)
            )
        return events

    def _tool_call(self, delta: Mapping[str, Any], position: int) -> list[bytes]:
        events: list[bytes] = []
        index = delta.get("index", position)
        function = delta.get("function") or {}
        item = self._calls.get(index)
        if item is None:
            events.extend(self._close_open())
            call_id = delta.get("id") or f"call_{os.urandom(8).hex()}"
            item = _call_item(call_id, function.get("name") or "", "", "in_progress", self._notes)
            self._calls[index] = item
            self._arguments[index] = []
            self._items.append(item)
            events.append(
                self._emit("response.output_item.added", output_index=len(self._items) - 1, item=dict(item))
            )
        elif function.get("name"):
            item["name"] += function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            self._arguments[index].append(arguments)
            if item["type"] == "function_call":  # a custom tool's input is sent whole at the end
                item["arguments"] += arguments
                events.append(
                    self._emit(
                        "response.function_call_arguments.delta",
                        item_id=item["id"],
                        output_index=self._items.index(item),
                        delta=arguments,
                    )
                )
        return events

    def feed(self, chunk: Mapping[str, Any]) -> bytes:
        """The events for one chat chunk (possibly none)."""
        events: list[bytes] = [] if self._ident is not None else self._start(chunk)
        if isinstance(chunk.get("usage"), dict):
            self._usage = _usage(chunk["usage"])
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                events.extend(self._text("reasoning", reasoning, None))
            if isinstance(delta.get("content"), str) and delta["content"]:
                events.extend(self._text("message", delta["content"], choice.get("logprobs")))
            for position, call in enumerate(delta.get("tool_calls") or ()):
                if isinstance(call, dict):
                    events.extend(self._tool_call(call, position))
            if choice.get("finish_reason") is not None:
                self._finish = choice["finish_reason"]
        return b"".join(events)

    def finish(self) -> bytes:
        """The closing events: open items done, then ``response.completed`` (or ``.incomplete``)."""
        events = [] if self._ident is not None else self._start({})
        events.extend(self._close_open())
        for key, item in self._calls.items():
            index = self._items.index(item)
            item["status"] = "completed"
            where = {"item_id": item["id"], "output_index": index}
            if item["type"] == "custom_tool_call":
                item["input"] = _custom_input("".join(self._arguments[key]))
                events.append(
                    self._emit("response.custom_tool_call_input.done", **where, input=item["input"])
                )
            else:
                events.append(
                    self._emit(
                        "response.function_call_arguments.done",
                        **where,
                        name=item["name"],
                        arguments=item["arguments"],
                    )
                )
            events.append(self._emit("response.output_item.done", output_index=index, item=item))
        status, incomplete = _status(self._finish)
        final = self._response(status, self._items, incomplete)
        events.append(self._emit(f"response.{status}", response=final))
        return b"".join(events)

    def fail(self, message: str, code: str) -> bytes:
        """The events ending a stream the backend broke off: ``error`` then ``response.failed``."""
        events = [] if self._ident is not None else self._start({})
        events.append(self._emit("error", code=code, message=message, param=None))
        failed = self._response("failed", self._items)
        failed["error"] = {"code": "server_error", "message": message}
        events.append(self._emit("response.failed", response=failed))
        return b"".join(events)
