"""Answering ``/v1/responses`` and ``/v1/messages`` from chat-completions backends.

The server translates the client's request into a chat request (``translate_responses`` /
``translate_messages``), which is what goes to the backend and what gets recorded — so the span has the
same shape as a chat completion, token ids included. This module gets the backend's chat answer
(buffered, or as a stream of chunks from an HTTP or in-process backend, synthesized when the backend
cannot stream) and writes it back in the client's API.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import aiohttp
from aiohttp import web

from agl_core.llm_proxy import _json
from agl_core.llm_proxy.backends import BackendPool, Replica
from agl_core.llm_proxy.client_api import TranslationNotes
from agl_core.llm_proxy.errors import ProxyHTTPError, error_body
from agl_core.llm_proxy.forward import (
    BufferedResult,
    ForwardContext,
    finish_stream,
    forward_buffered,
    open_stream,
    read_limited,
)
from agl_core.llm_proxy.in_process import call_in_process, checked_answer
from agl_core.llm_proxy.recording import Exchange
from agl_core.llm_proxy.streaming import (
    SSE_HEADERS,
    assemble_chat,
    chat_chunks,
    complete_events_end,
    end_quietly,
    iter_sse_data,
)
from agl_core.utils.http_guard import log_limited
from agl_proxy_translate.messages import (
    MessagesStream,
    anthropic_error_body,
    chat_to_message,
    messages_to_chat,
)
from agl_proxy_translate.responses import ResponsesStream, chat_to_response, responses_to_chat
from agl_proxy_translate.translation import Translation

__all__ = ["CLIENT_APIS", "ClientApi", "ClientApiSpec", "answer_translated"]

logger = logging.getLogger("agl_core.llm_proxy")

ClientApi = Literal["responses", "messages"]
"""The client APIs the proxy translates to chat completions."""


class _StreamTranslator(Protocol):
    """What :class:`ResponsesStream` and :class:`MessagesStream` have in common."""

    def feed(self, chunk: Mapping[str, Any]) -> bytes: ...
    def finish(self) -> bytes: ...
    def fail(self, message: str, code: str) -> bytes: ...


@dataclass(frozen=True)
class ClientApiSpec:
    """How one client API maps to chat completions, and how its errors look."""

    name: str
    """Recorded as ``agl.llm.client_api``."""
    to_chat: Callable[[Mapping[str, Any], Translation], dict[str, Any]]
    from_chat: Callable[[Mapping[str, Any], Mapping[str, Any], Translation], dict[str, Any]]
    stream: Callable[[Mapping[str, Any], Translation], _StreamTranslator]
    error: Callable[[ProxyHTTPError], dict[str, Any]]

    def error_response(self, exc: ProxyHTTPError) -> web.Response:
        """``exc`` as a JSON response in this API's error shape."""
        return web.Response(
            body=_json.dumps(self.error(exc)), status=exc.status, content_type="application/json"
        )

    def new_notes(self, refuse_hosted_tools: bool) -> Translation:
        """Fresh notes for one request."""
        return Translation(refuse_hosted_tools=refuse_hosted_tools)

    async def answer(
        self,
        request: web.Request,
        ctx: ForwardContext,
        pool: BackendPool,
        original: dict[str, Any],
        payload: dict[str, Any],
        raw: bytes,
        exchange: Exchange | None,
        notes: TranslationNotes,
    ) -> web.StreamResponse:
        """Answer through :func:`answer_translated` (``notes`` are the ones :meth:`new_notes` made)."""
        assert isinstance(notes, Translation), notes
        return await answer_translated(request, self, ctx, pool, original, payload, raw, exchange, notes)


CLIENT_APIS: dict[str, ClientApiSpec] = {
    "responses": ClientApiSpec(
        "openai.responses", responses_to_chat, chat_to_response, ResponsesStream, lambda exc: exc.body()
    ),
    "messages": ClientApiSpec(
        "anthropic.messages",
        messages_to_chat,
        chat_to_message,
        MessagesStream,
        lambda exc: anthropic_error_body(exc.status, exc.message),
    ),
}
"""Route name -> its translation."""


def _error_of(result: BufferedResult) -> ProxyHTTPError:
    """A backend's (normalized) error answer as an exception, to re-answer it in the client's API."""
    try:
        inner = _json.loads(result.body)["error"]
        return ProxyHTTPError(
            result.status,
            str(inner.get("message")),
            type=inner.get("type") if isinstance(inner.get("type"), str) else None,
            code=inner.get("code") if isinstance(inner.get("code"), (str, int)) else None,
            param=inner.get("param") if isinstance(inner.get("param"), str) else None,
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return ProxyHTTPError(result.status, result.error or f"The backend answered HTTP {result.status}.")


def _note(exchange: Exchange | None, result: BufferedResult) -> None:
    if exchange is not None:
        exchange.status, exchange.backend, exchange.attempts = (
            result.status,
            result.replica.label,
            result.attempts,
        )
        exchange.response_body = result.body
        if result.status >= 400:
            exchange.error, exchange.error_type = result.error, str(result.status)


def _parse(body: bytes, replica: Replica) -> dict[str, Any]:
    try:
        parsed = _json.loads(body)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ProxyHTTPError(
            502,
            f"Backend {replica.label} answered something that is not a chat.completion JSON object.",
            code="bad_backend_response",
        )
    return parsed


async def _in_process_chat(
    replica: Replica, payload: dict[str, Any], exchange: Exchange | None, timeout: float
) -> dict[str, Any]:
    in_process = replica.in_process
    assert in_process is not None
    if exchange is not None:
        exchange.backend = replica.label
    answer = await call_in_process(replica, lambda: in_process.chat_completions(dict(payload)), timeout)
    return checked_answer(replica, answer, exchange)


async def _buffered(
    ctx: ForwardContext, pool: BackendPool, payload: dict[str, Any], raw: bytes, exchange: Exchange | None
) -> dict[str, Any]:
    """The backend's whole ``chat.completion`` (asked without streaming)."""
    if pool.in_process:
        replica = pool.pick()
        assert replica is not None
        return await _in_process_chat(replica, payload, exchange, ctx.timeout)
    result = await forward_buffered(ctx, pool, "chat", payload, raw, stream=False)
    _note(exchange, result)
    if result.status >= 400:
        raise _error_of(result)
    chat = _parse(result.body, result.replica)
    if exchange is not None:
        exchange.response = chat  # recorded from this parse (read-only from here on)
    return chat


async def _chunks(
    ctx: ForwardContext, pool: BackendPool, payload: dict[str, Any], raw: bytes, exchange: Exchange | None
) -> AsyncGenerator[dict[str, Any], None]:
    """The backend's answer as ``chat.completion.chunk`` dicts; a broken stream ends with an error chunk."""
    replica = pool.pick() if pool.in_process else None
    if replica is not None and replica.stream_chat is not None:
        received: list[dict[str, Any]] = []
        if exchange is not None:
            exchange.backend = replica.label
        replica.in_flight += 1
        replica.requests += 1
        try:
            async for chunk in replica.stream_chat(dict(payload)):
                received.append(chunk)
                yield chunk
        except ProxyHTTPError as exc:
            if not received:
                raise
            if exchange is not None:
                exchange.error, exchange.error_type = exc.message, exc.kind
            yield exc.body()
        except Exception as exc:
            log_limited(
                logger,
                logging.ERROR,
                ("in_process_stream", replica.label),
                "In-process backend %s failed while streaming",
                replica.label,
                exc_info=True,
            )
            error = ProxyHTTPError(
                500, f"Backend {replica.label} failed: {type(exc).__name__}: {exc}", code="backend_error"
            )
            if not received:
                raise error from None
            if exchange is not None:
                exchange.error, exchange.error_type = error.message, error.kind
            yield error.body()
        finally:
            replica.in_flight -= 1
            if exchange is not None:
                exchange.status, exchange.response = 200, assemble_chat(received)
        return
    if pool.in_process or not pool.streaming:
        answer = await _buffered(ctx, pool, payload, raw, exchange)
        if exchange is not None:
            exchange.synthesized = True
        for chunk in chat_chunks(answer, include_usage=True):
            yield chunk
        return
    upstream, failure, replica, attempts = await open_stream(ctx, pool, "chat", payload, raw)
    if failure is not None:
        _note(exchange, failure)
        raise _error_of(failure)
    assert upstream is not None
    copy: list[bytes] = []
    if exchange is not None:
        exchange.backend, exchange.attempts, exchange.status = replica.label, attempts, upstream.status
    try:
        if not upstream.headers.get("Content-Type", "").startswith("text/event-stream"):
            body = await read_limited(upstream, ctx.max_response_bytes)
            result = BufferedResult(upstream.status, body, "application/json", replica, attempts)
            _note(exchange, result)
            if exchange is not None:
                exchange.synthesized = True
            for chunk in chat_chunks(_parse(body, replica), include_usage=True):
                yield chunk
            return
        if exchange is not None:
            exchange.sse = True
        size, tail = 0, b""
        try:
            async for received_bytes in upstream.content.iter_any():
                size += len(received_bytes)
                if size > ctx.max_response_bytes:
                    message = (
                        f"the backend's stream exceeded the proxy's limit of {ctx.max_response_bytes} bytes"
                    )
                    if exchange is not None:
                        exchange.error, exchange.error_type = message, "response_too_large"
                    yield error_body(message, code="response_too_large")
                    return
                copy.append(received_bytes)
                data = tail + received_bytes
                end = complete_events_end(data)
                data, tail = data[:end], data[end:]
                for event in iter_sse_data(data):
                    try:
                        chunk = _json.loads(event)
                    except ValueError:
                        continue
                    if isinstance(chunk, dict):
                        yield chunk
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            message = f"the backend's stream broke off: {type(exc).__name__}: {exc}"
            if exchange is not None:
                exchange.error, exchange.error_type = message, "stream_interrupted"
            yield error_body(message, code="stream_interrupted")
    finally:
        finish_stream(replica, upstream)
        if exchange is not None and exchange.sse:
            exchange.response_body = b"".join(copy)


async def answer_translated(
    request: web.Request,
    api: ClientApiSpec,
    ctx: ForwardContext,
    pool: BackendPool,
    original: dict[str, Any],
    payload: dict[str, Any],
    raw: bytes,
    exchange: Exchange | None,
    notes: Translation,
) -> web.StreamResponse:
    """Answer a translated request: ``payload`` (chat) goes to the backend, the answer back in ``api``.

    Raises:
        ProxyHTTPError: before anything was sent to the client (the caller answers it in ``api``'s shape).
    """
    if original.get("stream") is not True:
        chat = await _buffered(ctx, pool, payload, raw, exchange)
        return web.Response(
            body=_json.dumps(api.from_chat(chat, original, notes)), content_type="application/json"
        )
    chunks = _chunks(ctx, pool, payload, raw, exchange)
    try:
        first: dict[str, Any] | None = await anext(chunks)
    except StopAsyncIteration:
        first = None
    except BaseException:
        await chunks.aclose()
        raise
    translator = api.stream(original, notes)
    response = web.StreamResponse(status=200, headers=SSE_HEADERS)
    try:
        await response.prepare(request)
        pending = [first] if first is not None else []
        failed = False
        while True:
            for chunk in pending:
                if "error" in chunk and "choices" not in chunk:
                    inner = chunk["error"] if isinstance(chunk["error"], dict) else {}
                    await response.write(api_fail(translator, inner))
                    failed = True
                    break
                events = translator.feed(chunk)
                if events:
                    await response.write(events)
            if failed:
                break
            try:
                pending = [await anext(chunks)]
            except StopAsyncIteration:
                await response.write(translator.finish())
                break
    except ConnectionError as exc:  # the client went away: stop reading from the backend
        if exchange is not None:
            exchange.error, exchange.error_type = (
                f"the agent disconnected during the stream: {exc}",
                "agent_disconnected",
            )
    finally:
        await chunks.aclose()
    await end_quietly(response)
    return response


def api_fail(translator: _StreamTranslator, inner: Mapping[str, Any]) -> bytes:
    """The events ending a translated stream on a backend error event."""
    return translator.fail(
        str(inner.get("message") or "the backend failed"), str(inner.get("code") or "server_error")
    )
