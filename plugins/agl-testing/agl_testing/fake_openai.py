"""A local, deterministic OpenAI-compatible server for tests: :class:`FakeOpenAIServer`.

It serves ``POST /v1/chat/completions``, ``POST /v1/completions``, ``POST /v1/responses`` (OpenAI
Responses) and ``POST /v1/messages`` (Anthropic Messages), each streaming over SSE or not, and
``GET /v1/models`` on ``127.0.0.1`` at a port picked when it starts, and records every request.
Responses and Messages requests are answered from their *chat view* (the same messages a chat request
would carry; scripts and rules see that view), in the shapes the official ``openai`` and ``anthropic``
SDKs parse; with token ids on, their bodies carry top-level ``prompt_token_ids`` and ``token_ids`` (in
streams: on ``response.completed``, and on ``message_start`` / ``message_delta``). What agent CLIs send is
understood too (Claude Code and the Codex CLI run against it directly): system messages inside Messages
``messages``, Responses tools in ``additional_tools`` input items and ``namespace`` tools (seen by scripts
as ``namespace__name``), free-form ``custom`` tools (scripted with one string argument ``input``, answered
as ``custom_tool_call`` items) and their calls and outputs in ``input``.

Replies are scripted: a rule table (:class:`Rule`), a list of replies consumed in order, or a callable
``(request_json) -> Reply``; with none of them the server echoes the last user message (or the prompt).
A reply can be a :class:`Reply` (content and/or scripted :class:`ToolCall` s), a plain ``str`` or a
:class:`Fault` (HTTP error, latency, dropped connection).

Token ids follow vLLM's ``return_token_ids`` format: chat responses carry a top-level
``prompt_token_ids`` and ``choices[i].token_ids``; completion choices carry both; streamed chunks carry
``token_ids`` per delta and ``prompt_token_ids`` in the first chunk. Logprobs use OpenAI's format
(``choices[i].logprobs.content`` for chat, ``tokens``/``token_logprobs`` for completions) and always have
one entry per response token id.

Tokenization (:class:`FakeTokenizer`) is deterministic: text splits into runs of whitespace, runs of word
characters and single other characters; a piece's id is ``1000 + crc32(utf-8 bytes) % 1_000_000``;
``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>`` and ``<image>`` are ids 0-3. A chat prompt is rendered
ChatML-style (see :func:`render_chat_prompt`); an assistant turn is its content followed by one
``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` per tool call (see :func:`render_reply`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import socket
import time
import zlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

from aiohttp import web

from agl_core.utils.loop_thread import LoopThread
from agl_testing import _fake_formats as formats

__all__ = [
    "FakeOpenAIServer",
    "FakeTokenizer",
    "Fault",
    "RecordedRequest",
    "Reply",
    "Rule",
    "ScriptItem",
    "ToolCall",
    "last_user_text",
    "render_chat_prompt",
    "render_reply",
]

_SPECIAL_TOKENS: dict[str, int] = {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2, "<image>": 3}
_SPECIAL_RE = "|".join(re.escape(token) for token in _SPECIAL_TOKENS)
_PIECE_RE = re.compile(rf"{_SPECIAL_RE}|\s+|\w+|[^\w\s]")
_START_TIMEOUT_S = 10.0


class FakeTokenizer:
    """Deterministic word-level tokenizer (see the module docstring for the exact rule).

    ``decode`` knows the special tokens and every piece this instance has encoded.
    """

    def __init__(self) -> None:
        self._pieces: dict[int, str] = {token_id: token for token, token_id in _SPECIAL_TOKENS.items()}

    def pieces(self, text: str) -> list[str]:
        """Split ``text`` into token strings; ``"".join(pieces(t)) == t``."""
        return _PIECE_RE.findall(text)

    def token_id(self, piece: str) -> int:
        """The id of one piece."""
        special = _SPECIAL_TOKENS.get(piece)
        if special is not None:
            return special
        token_id = 1000 + zlib.crc32(piece.encode("utf-8")) % 1_000_000
        self._pieces.setdefault(token_id, piece)
        return token_id

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
        return [self.token_id(piece) for piece in self.pieces(text)]

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of ids this tokenizer produced; an unknown id raises ``KeyError``."""
        return "".join(self._pieces[token_id] for token_id in token_ids)


@dataclass(frozen=True)
class ToolCall:
    """A scripted tool call; ``id`` defaults to ``call_<n>`` with a per-server counter."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        """The arguments as the JSON string OpenAI puts in ``function.arguments``."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), sort_keys=True)


@dataclass(frozen=True)
class Reply:
    """A scripted assistant reply; ``finish_reason`` defaults to ``tool_calls`` or ``stop``."""

    content: str | None = None
    tool_calls: Sequence[ToolCall] = ()
    finish_reason: str | None = None


@dataclass(frozen=True)
class Fault:
    """An injected failure: wait ``delay_s``, then drop the connection or answer HTTP ``status``."""

    status: int = 500
    message: str = "Injected failure from FakeOpenAIServer."
    delay_s: float = 0.0
    drop_connection: bool = False


@dataclass(frozen=True)
class Rule:
    """``reply`` answers a request whose last user message contains ``when`` (or for which it is true)."""

    when: str | Callable[[dict[str, Any]], bool]
    reply: Reply | Fault | str

    def matches(self, request: dict[str, Any]) -> bool:
        """Whether this rule applies to ``request`` (the parsed JSON body)."""
        if isinstance(self.when, str):
            return self.when in last_user_text(request)
        return bool(self.when(request))


ScriptItem = Reply | Fault | str
"""What a script yields for one choice: a reply, a fault or plain content."""


@dataclass
class RecordedRequest:
    """One request the server received: path, parsed JSON body (None if not JSON) and headers."""

    method: str
    path: str
    body: Any
    headers: dict[str, str]


def _part_text(part: Any) -> str:
    """Prompt text of one content part (``<image>`` for images)."""
    if isinstance(part, dict):
        if part.get("type") == "text":
            return str(part.get("text", ""))
        if part.get("type") in ("image_url", "input_image", "image"):
            return "<image>"
    return json.dumps(part, sort_keys=True)


def _content_text(content: Any) -> str:
    """Text of a message ``content`` (a string or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_part_text(part) for part in content)
    return json.dumps(content, sort_keys=True)


def _tool_call_text(name: str, arguments: str) -> str:
    """The assistant-turn text of one tool call."""
    try:
        parsed: Any = json.loads(arguments)
    except ValueError:
        parsed = arguments
    return "<tool_call>" + json.dumps({"name": name, "arguments": parsed}, sort_keys=True) + "</tool_call>"


def render_chat_prompt(messages: Sequence[Mapping[str, Any]], tools: Sequence[Any] | None = None) -> str:
    """The prompt text the fake model reads: ChatML turns, tools first as a system turn."""
    out: list[str] = []
    if tools:
        out.append(f"<|im_start|>system\n# Tools\n{json.dumps(list(tools), sort_keys=True)}<|im_end|>\n")
    for message in messages:
        text = _content_text(message.get("content"))
        for call in message.get("tool_calls") or []:
            function = call.get("function", {}) if isinstance(call, dict) else {}
            text += _tool_call_text(str(function.get("name", "")), str(function.get("arguments", "")))
        out.append(f"<|im_start|>{message.get('role', 'user')}\n{text}<|im_end|>\n")
    out.append("<|im_start|>assistant\n")
    return "".join(out)


def render_reply(content: str | None, tool_calls: Sequence[tuple[str, str]] = ()) -> str:
    """The assistant-turn text whose tokens are the response token ids: content, then tool calls."""
    return (content or "") + "".join(_tool_call_text(name, args) for name, args in tool_calls)


def last_user_text(request: Mapping[str, Any]) -> str:
    """Text of the last user message of a chat request, or the prompt of a completion request."""
    messages = request.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                return _content_text(message.get("content"))
        return ""
    prompt = request.get("prompt")
    return prompt if isinstance(prompt, str) else ""


def _error(status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
    """An OpenAI-style JSON error response."""
    return web.json_response(
        {"error": {"message": message, "type": kind, "param": None, "code": None}}, status=status
    )


class _BadRequest(Exception):
    """A client mistake in the request body; becomes HTTP 400."""


@dataclass
class _Choice:
    """One generated choice: the resolved reply, its token pieces and ids."""

    index: int
    content: str | None
    tool_calls: list[dict[str, Any]]
    finish_reason: str
    pieces: list[str]
    token_ids: list[int]

    @property
    def pairs(self) -> list[tuple[str, int]]:
        """(piece, token id) per response token."""
        return list(zip(self.pieces, self.token_ids, strict=True))


class FakeOpenAIServer:
    """OpenAI-compatible test server with scripted, deterministic replies.

    Args:
        script: a callable ``(request_json) -> Reply | Fault | str`` or a list of those consumed in order
            (one per choice); when a list runs out the server answers HTTP 500 saying so.
        rules: checked first, in order; the first matching :class:`Rule` answers.
        models: ids listed by ``GET /v1/models`` (requests may name any model).
        token_ids: ``"request"`` returns token ids when the body has ``return_token_ids: true``;
            ``"always"`` / ``"never"`` override it.
        latency_s: delay before every response (simulated model latency).

    Use ``async with`` (or ``await start()`` / ``await stop()``) inside an event loop, or ``with`` to run
    it on a background thread. ``base_url`` ends in ``/v1``; ``requests`` lists what was received.
    """

    def __init__(
        self,
        script: Callable[[dict[str, Any]], ScriptItem] | Sequence[ScriptItem] | None = None,
        *,
        rules: Sequence[Rule] = (),
        models: Sequence[str] = ("fake-model",),
        token_ids: Literal["request", "always", "never"] = "request",
        latency_s: float = 0.0,
        tokenizer: FakeTokenizer | None = None,
    ) -> None:
        if script is not None and not callable(script) and not isinstance(script, Sequence):
            raise TypeError("script must be a callable (request_json) -> Reply, or a list of replies")
        if token_ids not in ("request", "always", "never"):
            raise ValueError(f"token_ids must be 'request', 'always' or 'never', got {token_ids!r}")
        self._script_fn = script if callable(script) else None
        self._script_list: deque[ScriptItem] | None = (
            deque(script) if script is not None and not callable(script) else None
        )
        self._scripted = len(self._script_list) if self._script_list is not None else 0
        self.rules = list(rules)
        self.models = list(models)
        self.token_ids = token_ids
        self.latency_s = latency_s
        self.tokenizer = tokenizer or FakeTokenizer()
        self.requests: list[RecordedRequest] = []
        self._faults: deque[Fault] = deque()
        self._ids = itertools.count(1)
        # unique per server, so two fakes behind one proxy never hand out the same response id
        self._id_prefix = os.urandom(3).hex()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._thread: LoopThread | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def port(self) -> int:
        """The TCP port; raises ``RuntimeError`` before the server is started."""
        if self._port is None:
            raise RuntimeError("FakeOpenAIServer is not running; start it with `async with` or `with` first")
        return self._port

    @property
    def open_connections(self) -> int:
        """HTTP connections currently open to this server (0 when it is not running)."""
        runner = self._runner
        server = runner.server if runner is not None else None
        if server is None:
            return 0
        return sum(1 for handler in server.connections if handler.transport is not None)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, ready for ``openai.OpenAI(base_url=...)``."""
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> None:
        """Bind a free port on 127.0.0.1 and start serving."""
        if self._runner is not None:
            raise RuntimeError("FakeOpenAIServer is already running")
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle_chat)
        app.router.add_post("/v1/completions", self._handle_completions)
        app.router.add_post("/v1/responses", self._handle_responses)
        app.router.add_post("/v1/messages", self._handle_messages)
        app.router.add_get("/v1/models", self._handle_models)
        # like vLLM, stop working on a request whose client went away
        runner = web.AppRunner(app, handle_signals=False, access_log=None, handler_cancellation=True)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", 0))
            await web.SockSite(runner, sock).start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner, self._port = runner, sock.getsockname()[1]

    async def stop(self) -> None:
        """Stop serving and release the port (idempotent)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        self._port = None

    async def __aenter__(self) -> FakeOpenAIServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def __enter__(self) -> FakeOpenAIServer:
        thread = LoopThread("fake-openai", timeout=_START_TIMEOUT_S)
        thread.start(self.start)
        self._thread = thread
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.stop(self.stop, timeout=_START_TIMEOUT_S)

    # ------------------------------------------------------------------ scripting

    def fail_next(self, *faults: Fault) -> None:
        """Answer the next requests with these faults, one per request, before consulting the script."""
        self._faults.extend(faults)

    def _resolve(self, request: dict[str, Any], echo: str) -> ScriptItem:
        """The script item answering one choice of ``request``."""
        for rule in self.rules:
            if rule.matches(request):
                return rule.reply
        if self._script_fn is not None:
            return self._script_fn(request)
        if self._script_list is not None:
            if not self._script_list:
                return Fault(
                    500,
                    f"FakeOpenAIServer script exhausted: {self._scripted} replies were scripted; add more "
                    "replies or pass a callable script.",
                )
            return self._script_list.popleft()
        return Reply(content=echo)

    def _choice(self, index: int, item: Reply | str, max_tokens: int | None) -> _Choice:
        """Turn one reply into a choice with its tokens, applying ``max_tokens`` to plain content."""
        reply = Reply(content=item) if isinstance(item, str) else item
        calls: list[dict[str, Any]] = [
            {
                "id": call.id or f"call_{next(self._ids)}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json()},
            }
            for call in reply.tool_calls
        ]
        content = reply.content
        finish = reply.finish_reason or ("tool_calls" if calls else "stop")
        if max_tokens is not None and not calls and content:
            pieces = self.tokenizer.pieces(content)
            if len(pieces) > max_tokens:
                content, finish = "".join(pieces[:max_tokens]), "length"
        text = render_reply(content, [(c["function"]["name"], c["function"]["arguments"]) for c in calls])
        pieces = self.tokenizer.pieces(text)
        return _Choice(index, content, calls, finish, pieces, [self.tokenizer.token_id(p) for p in pieces])

    def _logprob_entry(self, piece: str, token_id: int, top: int) -> dict[str, Any]:
        """One OpenAI chat logprob entry; values are synthetic but deterministic."""
        logprob = -round(0.05 * (1 + token_id % 10), 4)
        alternatives = [{"token": piece, "logprob": logprob, "bytes": list(piece.encode("utf-8"))}]
        for rank in range(1, top):
            alt = f"<alt{rank}>"
            alternatives.append({"token": alt, "logprob": logprob - rank, "bytes": list(alt.encode("utf-8"))})
        return {**alternatives[0], "top_logprobs": alternatives[:top]}

    # ------------------------------------------------------------------ HTTP plumbing

    async def _read(
        self, request: web.Request, anthropic: bool = False
    ) -> tuple[dict[str, Any] | None, web.StreamResponse | None]:
        """Record the request and apply faults/latency: returns the body, or the response to send."""
        try:
            body: Any = await request.json()
        except ValueError:
            body = None
        self.requests.append(RecordedRequest(request.method, request.path, body, dict(request.headers)))
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)
        if self._faults:
            return None, await self._fault(request, self._faults.popleft(), anthropic)
        if not isinstance(body, dict):
            message = "The request body must be a JSON object."
            return None, _anthropic(400, message) if anthropic else _error(400, message)
        return body, None

    async def _fault(self, request: web.Request, fault: Fault, anthropic: bool = False) -> web.StreamResponse:
        """Carry out a fault: delay, then drop the connection or return the error status."""
        if fault.delay_s > 0:
            await asyncio.sleep(fault.delay_s)
        if fault.drop_connection and request.transport is not None:
            request.transport.abort()
            raise asyncio.CancelledError
        if anthropic:
            return _anthropic(fault.status, fault.message)
        kind = "server_error" if fault.status >= 500 else "invalid_request_error"
        return _error(fault.status, fault.message, kind)

    def _wants_token_ids(self, body: Mapping[str, Any]) -> bool:
        """Whether to include vLLM-style token ids in this response."""
        if self.token_ids == "request":
            return bool(body.get("return_token_ids"))
        return self.token_ids == "always"

    def _generate(self, body: dict[str, Any], echo: str) -> list[_Choice] | Fault:
        """Resolve ``n`` choices; the first fault among them answers the whole request."""
        n = body.get("n") or 1
        if not isinstance(n, int) or n < 1:
            raise _BadRequest(f"'n' must be a positive integer, got {n!r}.")
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise _BadRequest(f"'max_tokens' must be a positive integer, got {max_tokens!r}.")
        choices: list[_Choice] = []
        for index in range(n):
            item = self._resolve(body, echo)
            if isinstance(item, Fault):
                return item
            choices.append(self._choice(index, item, max_tokens))
        return choices

    @staticmethod
    def _usage(prompt_tokens: int, choices: Sequence[_Choice]) -> dict[str, int]:
        completion = sum(len(choice.token_ids) for choice in choices)
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": prompt_tokens + completion,
        }

    async def _handle_models(self, request: web.Request) -> web.Response:
        self.requests.append(RecordedRequest(request.method, request.path, None, dict(request.headers)))
        data = [
            {"id": model, "object": "model", "created": 0, "owned_by": "agl-fake"} for model in self.models
        ]
        return web.json_response({"object": "list", "data": data})

    # ------------------------------------------------------------------ chat completions

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        body, early = await self._read(request)
        if early is not None or body is None:
            return early or _error(400, "The request body must be a JSON object.")
        messages, model = body.get("messages"), body.get("model")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            return _error(400, "'messages' must be a non-empty list of message objects.")
        if not isinstance(model, str) or not model:
            return _error(400, "'model' is required and must be a string.")
        try:
            generated = self._generate(body, last_user_text(body))
        except _BadRequest as exc:
            return _error(400, str(exc))
        if isinstance(generated, Fault):
            return await self._fault(request, generated)
        prompt_ids = self.tokenizer.encode(render_chat_prompt(messages, body.get("tools")))
        with_ids = self._wants_token_ids(body)
        top = body.get("top_logprobs") or 0
        if not isinstance(top, int) or not 0 <= top <= 20:
            return _error(400, f"'top_logprobs' must be an integer from 0 to 20, got {top!r}.")
        logprobs = bool(body.get("logprobs")) or top > 0
        ident, created = f"chatcmpl-fake-{self._id_prefix}-{next(self._ids)}", int(time.time())
        head = {"id": ident, "created": created, "model": model}
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = self._chat_chunks(head, generated, prompt_ids, with_ids, logprobs, top, include_usage)
            return await self._sse(request, chunks)
        out_choices = []
        for choice in generated:
            message: dict[str, Any] = {"role": "assistant", "content": choice.content}
            if choice.tool_calls:
                message["tool_calls"] = choice.tool_calls
            entry: dict[str, Any] = {
                "index": choice.index,
                "message": message,
                "finish_reason": choice.finish_reason,
            }
            entry["logprobs"] = (
                {"content": [self._logprob_entry(p, t, top) for p, t in choice.pairs]} if logprobs else None
            )
            if with_ids:
                entry["token_ids"] = choice.token_ids
            out_choices.append(entry)
        payload: dict[str, Any] = {**head, "object": "chat.completion", "choices": out_choices}
        payload["usage"] = self._usage(len(prompt_ids), generated)
        if with_ids:
            payload["prompt_token_ids"] = prompt_ids
        return web.json_response(payload)

    def _chat_chunks(
        self,
        head: dict[str, Any],
        choices: Sequence[_Choice],
        prompt_ids: list[int],
        with_ids: bool,
        logprobs: bool,
        top: int,
        include_usage: bool,
    ) -> list[dict[str, Any]]:
        """The SSE chunks of a streamed chat completion: role, one per content token, tool calls, finish."""
        chunks: list[dict[str, Any]] = []

        def chunk(
            index: int, delta: dict[str, Any], pairs: Sequence[tuple[str, int]], finish: str | None
        ) -> None:
            choice: dict[str, Any] = {"index": index, "delta": delta, "finish_reason": finish}
            choice["logprobs"] = (
                {"content": [self._logprob_entry(p, t, top) for p, t in pairs]}
                if logprobs and pairs
                else None
            )
            if with_ids:
                choice["token_ids"] = [t for _, t in pairs]
            data: dict[str, Any] = {**head, "object": "chat.completion.chunk", "choices": [choice]}
            if with_ids and not chunks:
                data["prompt_token_ids"] = prompt_ids
            chunks.append(data)

        for choice in choices:
            pairs = choice.pairs
            n_content = len(self.tokenizer.pieces(choice.content or ""))
            chunk(choice.index, {"role": "assistant", "content": ""}, [], None)
            for pair in pairs[:n_content]:
                chunk(choice.index, {"content": pair[0]}, [pair], None)
            offset = n_content
            for position, call in enumerate(choice.tool_calls):
                function = call["function"]
                size = len(self.tokenizer.pieces(_tool_call_text(function["name"], function["arguments"])))
                delta = {"tool_calls": [{"index": position, **call}]}
                chunk(choice.index, delta, pairs[offset : offset + size], None)
                offset += size
            chunk(choice.index, {}, [], choice.finish_reason)
        if include_usage:
            chunks.append(
                {
                    **head,
                    "object": "chat.completion.chunk",
                    "choices": [],
                    "usage": self._usage(len(prompt_ids), choices),
                }
            )
        return chunks

    async def _sse(self, request: web.Request, chunks: Sequence[dict[str, Any]]) -> web.StreamResponse:
        """Send ``chunks`` as server-sent events followed by ``data: [DONE]``."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        for data in chunks:
            await response.write(f"data: {json.dumps(data)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    # ------------------------------------------------------------------ text completions

    def _prompts(self, body: Mapping[str, Any]) -> list[tuple[str, list[int]]]:
        """The request's prompts as (text, token ids): a string, token ids, or a list of either."""
        prompt = body.get("prompt")
        items: list[Any]
        if isinstance(prompt, str) or (
            isinstance(prompt, list) and prompt and all(type(t) is int for t in prompt)
        ):
            items = [prompt]
        elif isinstance(prompt, list) and prompt:
            items = list(prompt)
        else:
            raise _BadRequest("'prompt' must be a string, a list of token ids, or a non-empty list of those.")
        out: list[tuple[str, list[int]]] = []
        for item in items:
            if isinstance(item, str):
                out.append((item, self.tokenizer.encode(item)))
            elif isinstance(item, list) and item and all(type(t) is int for t in item):
                try:
                    out.append((self.tokenizer.decode(item), list(item)))
                except KeyError as exc:
                    raise _BadRequest(f"Token id {exc.args[0]} is unknown to the fake tokenizer.") from None
            else:
                raise _BadRequest("Each prompt must be a string or a non-empty list of token ids.")
        return out

    async def _handle_completions(self, request: web.Request) -> web.StreamResponse:
        body, early = await self._read(request)
        if early is not None or body is None:
            return early or _error(400, "The request body must be a JSON object.")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return _error(400, "'model' is required and must be a string.")
        try:
            prompts = self._prompts(body)
            per_prompt: list[tuple[list[int], _Choice]] = []
            for text, ids in prompts:
                generated = self._generate({**body, "prompt": text}, text)
                if isinstance(generated, Fault):
                    return await self._fault(request, generated)
                per_prompt.extend((ids, choice) for choice in generated)
        except _BadRequest as exc:
            return _error(400, str(exc))
        with_ids = self._wants_token_ids(body)
        top = body.get("logprobs")
        if top is not None and (type(top) is not int or not 0 <= top <= 5):
            return _error(400, f"'logprobs' must be an integer from 0 to 5 for completions, got {top!r}.")
        ident, created = f"cmpl-fake-{self._id_prefix}-{next(self._ids)}", int(time.time())
        choices = []
        for index, (prompt_ids, choice) in enumerate(per_prompt):
            entry: dict[str, Any] = {
                "index": index,
                "text": "".join(choice.pieces),
                "finish_reason": choice.finish_reason,
                "logprobs": self._completion_logprobs(choice, top) if isinstance(top, int) else None,
            }
            if with_ids:
                entry["prompt_token_ids"], entry["token_ids"] = prompt_ids, choice.token_ids
            choices.append(entry)
        prompt_total = sum(len(ids) for _, ids in prompts)
        usage = self._usage(prompt_total, [choice for _, choice in per_prompt])
        head = {"id": ident, "object": "text_completion", "created": created, "model": model}
        if not body.get("stream"):
            return web.json_response({**head, "choices": choices, "usage": usage})
        chunks = []
        for entry in choices:
            lp = entry["logprobs"]
            for position, piece in enumerate(self.tokenizer.pieces(entry["text"])):
                part: dict[str, Any] = {
                    "index": entry["index"],
                    "text": piece,
                    "finish_reason": None,
                    "logprobs": None,
                }
                if lp is not None:
                    part["logprobs"] = {key: lp[key][position : position + 1] for key in lp}
                if with_ids:
                    part["token_ids"] = entry["token_ids"][position : position + 1]
                    if position == 0:
                        part["prompt_token_ids"] = entry["prompt_token_ids"]
                chunks.append({**head, "choices": [part]})
            chunks.append(
                {
                    **head,
                    "choices": [
                        {
                            "index": entry["index"],
                            "text": "",
                            "finish_reason": entry["finish_reason"],
                            "logprobs": None,
                        }
                    ],
                }
            )
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({**head, "choices": [], "usage": usage})
        return await self._sse(request, chunks)

    def _completion_logprobs(self, choice: _Choice, top: int) -> dict[str, list[Any]]:
        """Legacy completions logprobs: tokens, token_logprobs, top_logprobs, text_offset."""
        entries = [self._logprob_entry(p, t, max(top, 1)) for p, t in choice.pairs]
        offsets = list(itertools.accumulate((len(p) for p in choice.pieces), initial=0))[:-1]
        return {
            "tokens": [e["token"] for e in entries],
            "token_logprobs": [e["logprob"] for e in entries],
            "top_logprobs": [
                {alt["token"]: alt["logprob"] for alt in e["top_logprobs"][:top]} for e in entries
            ],
            "text_offset": offsets,
        }

    # ------------------------------------------------------------------ Responses and Anthropic Messages

    def _single_choice(self, view: dict[str, Any]) -> _Choice | Fault:
        """Resolve the one choice of a Responses or Messages request from its chat view."""
        max_tokens = view.get("max_tokens")
        if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 1):
            raise _BadRequest(f"max tokens must be a positive integer, got {max_tokens!r}.")
        item = self._resolve(view, last_user_text(view))
        return item if isinstance(item, Fault) else self._choice(0, item, max_tokens)

    async def _handle_responses(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/responses``: OpenAI's Responses API (function tools, text and images; no state)."""
        body, early = await self._read(request)
        if early is not None or body is None:
            return early or _error(400, "The request body must be a JSON object.")
        if not isinstance(body.get("model"), str) or not body["model"]:
            return _error(400, "'model' is required and must be a string.")
        if body.get("previous_response_id") is not None:
            return _error(400, "FakeOpenAIServer keeps no state: 'previous_response_id' is not supported.")
        try:
            view = formats.responses_chat_view(body)
            choice = self._single_choice(view)
        except (formats.FormatError, _BadRequest) as exc:
            return _error(400, str(exc))
        if isinstance(choice, Fault):
            return await self._fault(request, choice)
        prompt_ids = self.tokenizer.encode(render_chat_prompt(view["messages"], view.get("tools")))
        with_ids = self._wants_token_ids(body)
        include = body.get("include") or ()
        content_pieces = self.tokenizer.pieces(choice.content or "")
        text_logprobs = None
        if "message.output_text.logprobs" in include:
            top = body.get("top_logprobs") or 0
            text_logprobs = [
                self._logprob_entry(p, t, max(top, 1)) for p, t in choice.pairs[: len(content_pieces)]
            ]
        ident, created = f"fake{self._id_prefix}{next(self._ids)}", int(time.time())
        args = (ident, created, choice.content, choice.tool_calls, choice.finish_reason, prompt_ids)
        final = formats.response_object(body, *args, choice.token_ids, text_logprobs, with_ids)
        if not body.get("stream"):
            return web.json_response(final)
        start = formats.response_object(body, *args, [], None, False, status="in_progress")
        return await self._send_events(
            request, formats.response_events(start, final, content_pieces, text_logprobs)
        )

    async def _handle_messages(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/messages``: Anthropic's Messages API (tools, tool results, images, system)."""
        body, early = await self._read(request, anthropic=True)
        if early is not None or body is None:
            return early or _anthropic(400, "The request body must be a JSON object.")
        if not isinstance(body.get("model"), str) or not body["model"]:
            return _anthropic(400, "model: Field required")
        try:
            view = formats.messages_chat_view(body)
            choice = self._single_choice(view)
        except (formats.FormatError, _BadRequest) as exc:
            return _anthropic(400, str(exc))
        if isinstance(choice, Fault):
            return await self._fault(request, choice, anthropic=True)
        prompt_ids = self.tokenizer.encode(render_chat_prompt(view["messages"], view.get("tools")))
        with_ids = self._wants_token_ids(body)
        calls = [{**call, "id": call["id"].replace("call_", "toolu_", 1)} for call in choice.tool_calls]
        ident = f"fake{self._id_prefix}{next(self._ids)}"
        message = formats.message_object(
            body["model"],
            ident,
            choice.content,
            calls,
            choice.finish_reason,
            prompt_ids,
            choice.token_ids,
            with_ids,
        )
        if not body.get("stream"):
            return web.json_response(message)
        pieces = self.tokenizer.pieces(choice.content or "")
        return await self._send_events(request, formats.message_events(message, pieces))

    async def _send_events(self, request: web.Request, events: Sequence[bytes]) -> web.StreamResponse:
        """Send pre-encoded named SSE events (no ``[DONE]``: these APIs end with their own event)."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        for event in events:
            await response.write(event)
        await response.write_eof()
        return response


def _anthropic(status: int, message: str) -> web.Response:
    """An Anthropic-style JSON error response."""
    return web.json_response(formats.anthropic_error(status, message), status=status)
