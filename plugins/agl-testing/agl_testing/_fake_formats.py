"""Wire formats of the OpenAI Responses and Anthropic Messages APIs for :class:`FakeOpenAIServer`.

Written independently of the proxy's translation layer (the agl-proxy-translate plugin), so tests that
send the same conversation through both check one against the other. Each API gets a *chat view* of its
request (what the fake model reads: ChatML messages, tools, ``max_tokens``) and builders for its
non-streamed body and its streamed events.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "anthropic_error",
    "message_events",
    "message_object",
    "messages_chat_view",
    "response_events",
    "response_object",
    "responses_chat_view",
    "sse_event",
]


class FormatError(ValueError):
    """A request the real API would refuse with 400."""


def sse_event(event: str, data: Mapping[str, Any]) -> bytes:
    """One named server-sent event."""
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    """Anthropic's error body for ``status``."""
    kinds = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error"}
    kinds |= {
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        529: "overloaded_error",
    }
    return {"type": "error", "error": {"type": kinds.get(status, "api_error"), "message": message}}


# ---------------------------------------------------------------------------------------------- Responses


def _responses_text(content: Any) -> Any:
    """Chat ``content`` of a Responses message content (a string or input/output parts)."""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content or ():
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": part.get("text", "")})
        elif kind == "input_image":
            parts.append({"type": "image_url", "image_url": {"url": part.get("image_url")}})
        elif kind == "refusal":
            parts.append({"type": "text", "text": part.get("refusal", "")})
        else:
            raise FormatError(f"Unsupported content part type {kind!r}.")
    return parts


def _flat_name(name: Any, namespace: Any) -> str:
    """The chat-view name of a (possibly namespaced) Responses tool: ``namespace__name``."""
    return f"{namespace}__{name}" if isinstance(namespace, str) and namespace else str(name)


def declared_tools(body: Mapping[str, Any]) -> dict[str, tuple[dict[str, Any], str | None]]:
    """The function and custom tools of a Responses request (top-level ``tools`` and ``additional_tools``
    input items, namespaces flattened), by chat-view name: the tool and its namespace."""
    found: dict[str, tuple[dict[str, Any], str | None]] = {}

    def add(tools: Any, namespace: str | None) -> None:
        for tool in tools or ():
            if not isinstance(tool, dict):
                continue
            if tool.get("type") == "namespace" and namespace is None:
                add(tool.get("tools"), str(tool.get("name")))
            elif tool.get("type") in ("function", "custom"):
                found[_flat_name(tool.get("name"), namespace)] = (tool, namespace)

    add(body.get("tools"), None)
    items = body.get("input")
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            add(item.get("tools"), None)
    return found


def _tool_function(flat: str, tool: Mapping[str, Any]) -> dict[str, Any]:
    """The chat function of a declared tool; a custom tool takes its free-form input as ``input``."""
    function = {k: tool[k] for k in ("description", "parameters") if k in tool}
    if tool.get("type") == "custom":
        function["parameters"] = {"type": "object", "properties": {"input": {"type": "string"}}}
    return {"name": flat, **function}


def responses_chat_view(body: Mapping[str, Any]) -> dict[str, Any]:
    """The chat view of a Responses request: instructions, input items and tools as chat messages."""
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise FormatError("'input' must be a string or a list of input items.")
    for item in items:
        if not isinstance(item, dict):
            raise FormatError("Each input item must be an object.")
        kind = item.get("type", "message")
        if kind == "message":
            messages.append(
                {"role": item.get("role", "user"), "content": _responses_text(item.get("content"))}
            )
        elif kind in ("function_call", "custom_tool_call"):
            name = _flat_name(item.get("name"), item.get("namespace"))
            arguments = (
                item.get("arguments", "")
                if kind == "function_call"
                else json.dumps({"input": item.get("input", "")})
            )
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and last.get("tool_calls") is not None:
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            if isinstance(output, list) and all(isinstance(p, dict) for p in output):
                output = "".join(str(p.get("text", "")) for p in output)
            text = output if isinstance(output, str) else json.dumps(output)
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": text})
        elif kind in ("reasoning", "additional_tools"):  # tools: see declared_tools
            continue
        else:
            raise FormatError(f"Unsupported input item type {kind!r}.")
    tools = [
        {"type": "function", "function": _tool_function(flat, tool)}
        for flat, (tool, _) in declared_tools(body).items()
    ]
    view: dict[str, Any] = {"model": body.get("model"), "messages": messages}
    if tools:
        view["tools"] = tools
    if body.get("max_output_tokens") is not None:
        view["max_tokens"] = body["max_output_tokens"]
    return view


def _usage_responses(prompt_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt_tokens + output_tokens,
    }


def response_object(
    body: Mapping[str, Any],
    ident: str,
    created: int,
    content: str | None,
    tool_calls: Sequence[Mapping[str, Any]],
    finish_reason: str,
    prompt_ids: list[int],
    token_ids: list[int],
    logprobs: list[dict[str, Any]] | None,
    with_ids: bool,
    status: str = "completed",
) -> dict[str, Any]:
    """A ``response`` object (also the payload of ``response.created``/``completed`` events)."""
    output: list[dict[str, Any]] = []
    if status != "in_progress":
        if content:
            part = {"type": "output_text", "text": content, "annotations": [], "logprobs": logprobs or []}
            output.append(
                {
                    "id": f"msg_{ident}",
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [part],
                }
            )
        declared = declared_tools(body)
        for position, call in enumerate(tool_calls):
            output.append(_function_call_item(ident, position, call, declared))
    incomplete = status == "completed" and finish_reason == "length"
    tools = body.get("tools") or []
    out: dict[str, Any] = {
        "id": f"resp_{ident}",
        "object": "response",
        "created_at": created,
        "status": "incomplete" if incomplete else status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": body.get("model"),
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "temperature": body.get("temperature", 1.0),
        "top_p": body.get("top_p", 1.0),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": tools,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "metadata": body.get("metadata") or {},
        "usage": _usage_responses(len(prompt_ids), len(token_ids)) if status != "in_progress" else None,
    }
    if with_ids and status != "in_progress":
        out["prompt_token_ids"], out["token_ids"] = prompt_ids, token_ids
    return out


def _function_call_item(
    ident: str,
    position: int,
    call: Mapping[str, Any],
    declared: Mapping[str, tuple[dict[str, Any], str | None]],
) -> dict[str, Any]:
    """The output item of a scripted call, as the tool was declared (function or custom, namespaced)."""
    function = call["function"]
    tool, namespace = declared.get(function["name"], ({"type": "function", "name": function["name"]}, None))
    item: dict[str, Any] = {"id": f"fc_{ident}_{position}", "status": "completed", "call_id": call["id"]}
    item["name"] = tool.get("name", function["name"])
    if tool.get("type") == "custom":
        try:
            arguments = json.loads(function["arguments"])
        except ValueError:
            arguments = None
        text = arguments.get("input") if isinstance(arguments, dict) else None
        item.update(type="custom_tool_call", input=text if isinstance(text, str) else function["arguments"])
    else:
        item.update(type="function_call", arguments=function["arguments"])
    if namespace is not None:
        item["namespace"] = namespace
    return item


def response_events(
    start: dict[str, Any], final: dict[str, Any], pieces: Sequence[str], text_logprobs: list[Any] | None
) -> list[bytes]:
    """The event stream of a Responses answer: created, per-item events with text deltas, completed."""
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": start}),
        ("response.in_progress", {"response": start}),
    ]
    for index, item in enumerate(final["output"]):
        if item["type"] == "message":
            part = item["content"][0]
            events.append(
                (
                    "response.output_item.added",
                    {"output_index": index, "item": {**item, "status": "in_progress", "content": []}},
                )
            )
            empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            where = {"item_id": item["id"], "output_index": index, "content_index": 0}
            events.append(("response.content_part.added", {**where, "part": empty}))
            for position, piece in enumerate(pieces):
                lp = [text_logprobs[position]] if text_logprobs else []
                events.append(("response.output_text.delta", {**where, "delta": piece, "logprobs": lp}))
            events.append(
                ("response.output_text.done", {**where, "text": part["text"], "logprobs": part["logprobs"]})
            )
            events.append(("response.content_part.done", {**where, "part": part}))
        elif item["type"] == "custom_tool_call":
            added = {**item, "status": "in_progress", "input": ""}
            events.append(("response.output_item.added", {"output_index": index, "item": added}))
            where = {"item_id": item["id"], "output_index": index}
            events.append(("response.custom_tool_call_input.delta", {**where, "delta": item["input"]}))
            events.append(("response.custom_tool_call_input.done", {**where, "input": item["input"]}))
        else:
            added = {**item, "status": "in_progress", "arguments": ""}
            events.append(("response.output_item.added", {"output_index": index, "item": added}))
            where = {"item_id": item["id"], "output_index": index}
            events.append(("response.function_call_arguments.delta", {**where, "delta": item["arguments"]}))
            events.append(
                (
                    "response.function_call_arguments.done",
                    {**where, "name": item["name"], "arguments": item["arguments"]},
                )
            )
        events.append(("response.output_item.done", {"output_index": index, "item": item}))
    kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    events.append((kind, {"response": final}))
    return [
        sse_event(name, {"type": name, "sequence_number": n, **data}) for n, (name, data) in enumerate(events)
    ]


# ---------------------------------------------------------------------------------------------- Anthropic


def _anthropic_blocks(content: Any, role: str) -> list[dict[str, Any]]:
    """Chat messages for one Anthropic message (tool results become ``tool`` messages)."""
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise FormatError("'content' must be a string or a list of content blocks.")
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append({"type": "text", "text": block.get("text", "")})
        elif kind == "image":
            parts.append({"type": "image_url", "image_url": {"url": "<image>"}})
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input") or {}, sort_keys=True)
            calls.append(
                {
                    "id": block.get("id"),
                    "type": "function",
                    "function": {"name": block.get("name"), "arguments": arguments},
                }
            )
        elif kind == "tool_result":
            result = block.get("content")
            text = (
                result
                if isinstance(result, str)
                else "".join(b.get("text", "") for b in result or () if isinstance(b, dict))
            )
            out.append({"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": text})
        elif kind in ("thinking", "redacted_thinking"):
            continue
        else:
            raise FormatError(f"Unsupported content block type {kind!r}.")
    if parts or calls:
        message: dict[str, Any] = {"role": role, "content": parts or None}
        if calls:
            message["tool_calls"] = calls
        out.append(message)
    return out


def messages_chat_view(body: Mapping[str, Any]) -> dict[str, Any]:
    """The chat view of an Anthropic Messages request."""
    if not isinstance(body.get("max_tokens"), int):
        raise FormatError("max_tokens: Field required")
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if isinstance(system, str):
        messages.append({"role": "system", "content": system})
    elif isinstance(system, list):
        messages.append({"role": "system", "content": "".join(b.get("text", "") for b in system)})
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise FormatError("messages: Field required")
    for message in raw:
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant", "system"):
            raise FormatError("Each message needs a role of 'user', 'assistant' or 'system'.")
        content = message.get("content")
        if message["role"] == "system":  # the API accepts system messages inside the conversation
            text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content or ())
            messages.append({"role": "system", "content": text})
        else:
            messages.extend(_anthropic_blocks(content, message["role"]))
    tools = [
        {
            "type": "function",
            "function": {
                "name": t.get("name"),
                "description": t.get("description"),
                "parameters": t.get("input_schema"),
            },
        }
        for t in body.get("tools") or ()
        if isinstance(t, dict) and t.get("defer_loading") is not True  # loaded on demand: not shown
    ]
    view: dict[str, Any] = {
        "model": body.get("model"),
        "messages": messages,
        "max_tokens": body["max_tokens"],
    }
    if tools:
        view["tools"] = tools
    return view


_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def message_object(
    model: str,
    ident: str,
    content: str | None,
    tool_calls: Sequence[Mapping[str, Any]],
    finish_reason: str,
    prompt_ids: list[int],
    token_ids: list[int],
    with_ids: bool,
) -> dict[str, Any]:
    """An Anthropic ``message`` object."""
    blocks: list[dict[str, Any]] = []
    if content:
        blocks.append({"type": "text", "text": content})
    for call in tool_calls:
        try:
            arguments = json.loads(call["function"]["arguments"])
        except ValueError:
            arguments = {}
        blocks.append(
            {"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": arguments}
        )
    out: dict[str, Any] = {
        "id": f"msg_{ident}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": _STOP_REASONS.get(finish_reason, "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": len(prompt_ids),
            "output_tokens": len(token_ids),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
    if with_ids:
        out["prompt_token_ids"], out["token_ids"] = prompt_ids, token_ids
    return out


def message_events(message: dict[str, Any], pieces: Sequence[str]) -> list[bytes]:
    """The event stream of an Anthropic answer: message_start, blocks with deltas, message_delta, stop."""
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    for key in ("token_ids",):
        start.pop(key, None)
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": start}), ("ping", {})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append(
                ("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
            )
            for piece in pieces:
                events.append(
                    ("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": piece}})
                )
        else:
            opening = {**block, "input": {}}
            events.append(("content_block_start", {"index": index, "content_block": opening}))
            partial = json.dumps(block["input"])
            events.append(
                (
                    "content_block_delta",
                    {"index": index, "delta": {"type": "input_json_delta", "partial_json": partial}},
                )
            )
        events.append(("content_block_stop", {"index": index}))
    delta: dict[str, Any] = {
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": message["usage"]["output_tokens"]},
    }
    if "token_ids" in message:
        delta["token_ids"] = message["token_ids"]
    events.append(("message_delta", delta))
    events.append(("message_stop", {}))
    return [sse_event(name, {"type": name, **data}) for name, data in events]
