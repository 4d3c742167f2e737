"""Server-sent events: parse a streamed completion, assemble it into one response, or synthesize a stream.

The proxy passes a backend's SSE bytes to the agent untouched and keeps a copy; after the stream ends
the copy is parsed here and merged into the shape of a non-streamed response (text, tool calls,
``token_ids`` per choice, ``prompt_token_ids``, logprobs, usage), which is what gets recorded. For
backends that cannot stream, :func:`synthesize_sse` turns a complete response into an SSE stream.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

from aiohttp import web

import agl_core.llm_proxy._json as _json

__all__ = [
    "DONE_EVENT",
    "SSE_HEADERS",
    "Operation",
    "assemble_chat",
    "assemble_completion",
    "assemble_stream",
    "chat_chunks",
    "complete_events_end",
    "encode_event",
    "end_quietly",
    "iter_sse_data",
    "synthesize_sse",
    "write_quietly",
]

Operation = Literal["chat", "text_completion"]
"""The two proxied operations, named as in ``gen_ai.operation.name``."""

DONE_EVENT = b"data: [DONE]\n\n"
"""The event that ends an OpenAI stream."""

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
"""Response headers of every stream the proxy sends."""


async def write_quietly(response: web.StreamResponse, data: bytes) -> None:
    """Write to a stream whose agent may have gone away (errors are ignored: nobody is listening)."""
    with contextlib.suppress(ConnectionError, RuntimeError):
        await response.write(data)


async def end_quietly(response: web.StreamResponse) -> None:
    """End a stream whose agent may have gone away."""
    with contextlib.suppress(ConnectionError, RuntimeError):
        await response.write_eof()


def encode_event(payload: Any) -> bytes:
    """One SSE event carrying ``payload`` as JSON."""
    return b"data: " + _json.dumps(payload) + b"\n\n"


def complete_events_end(data: bytes) -> int:
    """Index just past the last complete event in ``data`` (0 when no event is complete yet)."""
    end = data.rfind(b"\n\n")
    end = end + 2 if end >= 0 else 0
    crlf = data.rfind(b"\r\n\r\n")
    return max(end, crlf + 4) if crlf >= 0 else end


def iter_sse_data(raw: bytes) -> Iterator[bytes]:
    """Yield the ``data`` payload of each event in ``raw``, stopping at ``[DONE]``.

    Comment lines and other fields (``event:``, ``id:``) are skipped; multi-line data is joined with
    newlines, as the SSE specification says.
    """
    text = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    for block in text.split(b"\n\n"):
        data: list[bytes] = []
        for line in block.split(b"\n"):
            if line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)
        if not data:
            continue
        payload = b"\n".join(data)
        if payload.strip() == b"[DONE]":
            return
        yield payload


def _merge_tool_calls(calls: dict[int, dict[str, Any]], deltas: Any) -> None:
    """Accumulate streamed tool-call deltas by their ``index``: id/type/name once, arguments appended."""
    if not isinstance(deltas, list):
        return
    for position, delta in enumerate(deltas):
        if not isinstance(delta, Mapping):
            continue
        index = delta.get("index", position)
        call = calls.setdefault(
            index if isinstance(index, int) else position,
            {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
        )
        if delta.get("id"):
            call["id"] = delta["id"]
        if delta.get("type"):
            call["type"] = delta["type"]
        function = delta.get("function")
        if isinstance(function, Mapping):
            if function.get("name"):
                call["function"]["name"] += function["name"]
            if function.get("arguments"):
                call["function"]["arguments"] += function["arguments"]


def _merge_envelope(out: dict[str, Any], chunk: Mapping[str, Any]) -> bool:
    """Take a chunk's top-level fields into ``out`` (the first id, created, model, system fingerprint and
    prompt token ids; the last usage). False for an ``{"error": ...}`` event, which is kept under "error"."""
    if "error" in chunk:
        out["error"] = chunk["error"]
        return False
    for key in ("id", "created", "model", "system_fingerprint", "prompt_token_ids"):
        if key not in out and chunk.get(key) is not None:
            out[key] = chunk[key]
    if chunk.get("usage"):
        out["usage"] = chunk["usage"]
    return True


def assemble_chat(chunks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Merge ``chat.completion.chunk`` dicts into one ``chat.completion`` dict.

    Per choice index: role, concatenated ``content`` and ``reasoning_content``, tool calls, the last
    ``finish_reason``, ``token_ids`` concatenated in order and ``logprobs.content`` concatenated. The
    first ``prompt_token_ids`` seen is kept; ``usage`` comes from the chunk that carries it. An
    ``{"error": ...}`` event is kept under ``"error"``.
    """
    out: dict[str, Any] = {"object": "chat.completion"}
    choices: dict[int, dict[str, Any]] = {}
    texts: dict[int, list[str]] = {}
    reasoning: dict[int, list[str]] = {}
    calls: dict[int, dict[int, dict[str, Any]]] = {}
    for chunk in chunks:
        if not _merge_envelope(out, chunk):
            continue
        for raw_choice in chunk.get("choices") or ():
            index = raw_choice.get("index", 0)
            choice = choices.get(index)
            if choice is None:
                choice = choices[index] = {
                    "index": index,
                    "message": {"role": "assistant", "content": None},
                    "finish_reason": None,
                    "logprobs": None,
                }
                texts[index], reasoning[index], calls[index] = [], [], {}
            delta = raw_choice.get("delta") or {}
            if delta.get("role"):
                choice["message"]["role"] = delta["role"]
            if isinstance(delta.get("content"), str):
                texts[index].append(delta["content"])
            if isinstance(delta.get("reasoning_content"), str):
                reasoning[index].append(delta["reasoning_content"])
            _merge_tool_calls(calls[index], delta.get("tool_calls"))
            if raw_choice.get("finish_reason") is not None:
                choice["finish_reason"] = raw_choice["finish_reason"]
            if raw_choice.get("stop_reason") is not None:
                choice["stop_reason"] = raw_choice["stop_reason"]
            if raw_choice.get("token_ids") is not None:
                choice.setdefault("token_ids", []).extend(raw_choice["token_ids"])
            logprobs = raw_choice.get("logprobs")
            if isinstance(logprobs, Mapping) and isinstance(logprobs.get("content"), list):
                if choice["logprobs"] is None:
                    choice["logprobs"] = {"content": []}
                choice["logprobs"]["content"].extend(logprobs["content"])
    for index, choice in choices.items():
        message = choice["message"]
        if texts[index]:
            message["content"] = "".join(texts[index])
        if reasoning[index]:
            message["reasoning_content"] = "".join(reasoning[index])
        if calls[index]:
            message["tool_calls"] = [calls[index][key] for key in sorted(calls[index])]
    out["choices"] = [choices[key] for key in sorted(choices)]
    return out


def assemble_completion(chunks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Merge streamed ``text_completion`` chunks into one ``text_completion`` dict.

    Per choice index: concatenated ``text``, ``token_ids``, the first ``prompt_token_ids``, the last
    ``finish_reason`` and legacy logprobs (``tokens``, ``token_logprobs``, ``top_logprobs``,
    ``text_offset`` lists) concatenated key by key.
    """
    out: dict[str, Any] = {"object": "text_completion"}
    choices: dict[int, dict[str, Any]] = {}
    texts: dict[int, list[str]] = {}
    for chunk in chunks:
        if not _merge_envelope(out, chunk):
            continue
        for raw_choice in chunk.get("choices") or ():
            index = raw_choice.get("index", 0)
            choice = choices.get(index)
            if choice is None:
                choice = choices[index] = {
                    "index": index,
                    "text": "",
                    "finish_reason": None,
                    "logprobs": None,
                }
                texts[index] = []
            if isinstance(raw_choice.get("text"), str):
                texts[index].append(raw_choice["text"])
            if raw_choice.get("finish_reason") is not None:
                choice["finish_reason"] = raw_choice["finish_reason"]
            if raw_choice.get("stop_reason") is not None:
                choice["stop_reason"] = raw_choice["stop_reason"]
            if raw_choice.get("token_ids") is not None:
                choice.setdefault("token_ids", []).extend(raw_choice["token_ids"])
            if "prompt_token_ids" not in choice and raw_choice.get("prompt_token_ids") is not None:
                choice["prompt_token_ids"] = raw_choice["prompt_token_ids"]
            logprobs = raw_choice.get("logprobs")
            if isinstance(logprobs, Mapping):
                merged = choice["logprobs"] if choice["logprobs"] is not None else {}
                for key, value in logprobs.items():
                    if isinstance(value, list):
                        merged.setdefault(key, []).extend(value)
                choice["logprobs"] = merged
    for index, choice in choices.items():
        choice["text"] = "".join(texts[index])
    out["choices"] = [choices[key] for key in sorted(choices)]
    return out


def assemble_stream(raw: bytes, operation: Operation) -> dict[str, Any]:
    """Parse SSE bytes and assemble them (see :func:`assemble_chat` / :func:`assemble_completion`).

    Events that are not JSON objects (a stream cut in the middle of an event) are skipped; their count
    is returned under ``"agl_unparsed_events"`` so the record can say the stream was damaged.
    """
    chunks: list[dict[str, Any]] = []
    unparsed = 0
    for payload in iter_sse_data(raw):
        try:
            chunk = _json.loads(payload)
        except ValueError:
            chunk = None
        if isinstance(chunk, dict):
            chunks.append(chunk)
        else:
            unparsed += 1
    out = assemble_chat(chunks) if operation == "chat" else assemble_completion(chunks)
    if unparsed:
        out["agl_unparsed_events"] = unparsed
    return out


def chat_chunks(response: Mapping[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """A complete ``chat.completion`` as the chunks a stream of it carries (see :func:`synthesize_sse`)."""
    head = {
        "id": response.get("id"),
        "object": "chat.completion.chunk",
        "created": response.get("created"),
        "model": response.get("model"),
    }
    chunks: list[dict[str, Any]] = []
    for choice in response.get("choices") or ():
        index = choice.get("index", 0)
        message = choice.get("message") or {}
        first: dict[str, Any] = {
            **head,
            "choices": [
                {
                    "index": index,
                    "delta": {"role": message.get("role", "assistant"), "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
        }
        if not chunks and response.get("prompt_token_ids") is not None:
            first["prompt_token_ids"] = response["prompt_token_ids"]
        chunks.append(first)
        delta: dict[str, Any] = {}
        if message.get("content"):
            delta["content"] = message["content"]
        if message.get("reasoning_content"):
            delta["reasoning_content"] = message["reasoning_content"]
        if message.get("tool_calls"):
            delta["tool_calls"] = [
                {"index": position, **call} for position, call in enumerate(message["tool_calls"])
            ]
        body: dict[str, Any] = {
            "index": index,
            "delta": delta,
            "logprobs": choice.get("logprobs"),
            "finish_reason": None,
        }
        if choice.get("token_ids") is not None:
            body["token_ids"] = choice["token_ids"]
        chunks.append({**head, "choices": [body]})
        chunks.append(
            {
                **head,
                "choices": [
                    {
                        "index": index,
                        "delta": {},
                        "logprobs": None,
                        "finish_reason": choice.get("finish_reason"),
                    }
                ],
            }
        )
    if include_usage and response.get("usage") is not None:
        chunks.append({**head, "choices": [], "usage": response["usage"]})
    return chunks


def _completion_chunks(response: Mapping[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    head = {
        "id": response.get("id"),
        "object": "text_completion",
        "created": response.get("created"),
        "model": response.get("model"),
    }
    chunks: list[dict[str, Any]] = []
    for choice in response.get("choices") or ():
        body = {key: value for key, value in choice.items() if key != "finish_reason"}
        body["finish_reason"] = None
        chunks.append({**head, "choices": [body]})
        final = {
            "index": choice.get("index", 0),
            "text": "",
            "logprobs": None,
            "finish_reason": choice.get("finish_reason"),
        }
        chunks.append({**head, "choices": [final]})
    if chunks and response.get("prompt_token_ids") is not None:
        chunks[0]["prompt_token_ids"] = response["prompt_token_ids"]
    if include_usage and response.get("usage") is not None:
        chunks.append({**head, "choices": [], "usage": response["usage"]})
    return chunks


def synthesize_sse(response: Mapping[str, Any], operation: Operation, include_usage: bool = False) -> bytes:
    """Re-emit a complete response as an SSE stream ending in ``data: [DONE]``.

    Per choice: a role chunk, one chunk with the whole content, tool calls, ``token_ids`` and logprobs,
    and a ``finish_reason`` chunk; the first chunk carries ``prompt_token_ids``. A usage chunk (empty
    ``choices``) is added only when the agent asked for it with ``stream_options.include_usage``.
    """
    chunks = (
        chat_chunks(response, include_usage)
        if operation == "chat"
        else _completion_chunks(response, include_usage)
    )
    return b"".join(encode_event(chunk) for chunk in chunks) + DONE_EVENT
