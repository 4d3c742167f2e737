"""Answering requests from in-process backends (Python objects implementing ``InProcessBackend``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web

import agl_core.llm_proxy._json as _json
from agl_core.llm_proxy.backends import BackendPool, Replica
from agl_core.llm_proxy.errors import ProxyHTTPError
from agl_core.llm_proxy.recording import Exchange
from agl_core.llm_proxy.streaming import (
    DONE_EVENT,
    SSE_HEADERS,
    Operation,
    assemble_chat,
    assemble_completion,
    encode_event,
    end_quietly,
    synthesize_sse,
    write_quietly,
)
from agl_core.utils.http_guard import log_limited

__all__ = ["answer_in_process", "call_in_process", "checked_answer"]

logger = logging.getLogger("agl_core.llm_proxy")

T = TypeVar("T")


def _failure(replica: Replica, exc: BaseException) -> ProxyHTTPError:
    return ProxyHTTPError(
        500, f"Backend {replica.label} failed: {type(exc).__name__}: {exc}", code="backend_error"
    )


async def answer_in_process(
    request: web.Request,
    operation: Operation,
    pool: BackendPool,
    payload: dict[str, Any],
    exchange: Exchange | None,
    timeout: float,
) -> web.StreamResponse:
    """Call an in-process replica of ``pool`` and answer the agent (JSON, native SSE or synthesized SSE).

    The backend gets a copy of the agent's body. ``ProxyHTTPError`` from the backend keeps its status;
    other exceptions become 500 ``backend_error``, and a call slower than ``timeout`` a 504.
    """
    replica = pool.pick()
    assert replica is not None and replica.in_process is not None
    if operation == "chat":
        call, stream_call = replica.in_process.chat_completions, replica.stream_chat
    else:
        call, stream_call = replica.completions_fn, replica.stream_completions
        if call is None and stream_call is None:
            raise ProxyHTTPError(
                404,
                f"Backend {replica.label} for model {payload['model']!r} serves only chat completions; "
                "use /v1/chat/completions.",
                code="operation_not_supported",
            )
    if exchange is not None:
        exchange.backend = replica.label
    wants_stream = payload.get("stream") is True
    if wants_stream and stream_call is not None:
        chunks = stream_call

        def start_stream() -> Awaitable[web.StreamResponse]:
            return _stream(request, operation, replica, chunks(dict(payload)), exchange)

        return await call_in_process(replica, start_stream, timeout, bounded=False)
    if call is None:  # only a streaming method: collect its chunks
        collect = stream_call
        answer = await call_in_process(
            replica, lambda: _collect(operation, collect(dict(payload))), timeout, bounded=False
        )
    else:
        answer = await call_in_process(replica, lambda: call(dict(payload)), timeout)
    checked_answer(replica, answer, exchange)
    if wants_stream:
        include_usage = bool((payload.get("stream_options") or {}).get("include_usage"))
        if exchange is not None:
            exchange.synthesized = True
        return web.Response(body=synthesize_sse(answer, operation, include_usage), headers=SSE_HEADERS)
    return web.Response(body=_json.dumps(answer), content_type="application/json")


async def call_in_process(
    replica: Replica, start: Callable[[], Awaitable[T]], timeout: float, *, bounded: bool = True
) -> T:
    """Await ``start()``, a call of in-process ``replica``, counted in its load.

    ``ProxyHTTPError`` from the backend keeps its status; a call slower than ``timeout`` (when
    ``bounded``; a stream is not) is a 504 ``backend_timeout``, any other exception a logged 500
    ``backend_error``.
    """
    replica.in_flight += 1
    replica.requests += 1
    try:
        call = start()
        return await (asyncio.wait_for(call, timeout) if bounded else call)
    except ProxyHTTPError:
        raise
    except asyncio.TimeoutError:
        raise ProxyHTTPError(
            504, f"Backend {replica.label} did not answer within {timeout:g}s.", code="backend_timeout"
        ) from None
    except Exception as exc:
        log_limited(
            logger,
            logging.ERROR,
            ("in_process", replica.label),
            "In-process backend %s failed",
            replica.label,
            exc_info=True,
        )
        raise _failure(replica, exc) from None
    finally:
        replica.in_flight -= 1


def checked_answer(replica: Replica, answer: Any, exchange: Exchange | None) -> dict[str, Any]:
    """``answer`` if it is a response dict (recorded on ``exchange``); a 500 ``backend_error`` otherwise."""
    if not isinstance(answer, dict):
        raise ProxyHTTPError(
            500,
            f"Backend {replica.label} returned {type(answer).__name__}, not an OpenAI-style response dict.",
            code="backend_error",
        )
    if exchange is not None:
        exchange.response, exchange.status = answer, 200
    return answer


async def _collect(operation: Operation, chunks: AsyncIterator[dict[str, Any]]) -> dict[str, Any]:
    """The whole answer assembled from a streaming-only backend's chunks."""
    received = [chunk async for chunk in chunks]
    return assemble_chat(received) if operation == "chat" else assemble_completion(received)


async def _stream(
    request: web.Request,
    operation: Operation,
    replica: Replica,
    chunks: AsyncIterator[dict[str, Any]],
    exchange: Exchange | None,
) -> web.StreamResponse:
    """Send a native in-process stream as SSE; an error after the first chunk ends it with an error event."""
    response = web.StreamResponse(headers=SSE_HEADERS)
    received: list[dict[str, Any]] = []
    failure: tuple[str, str] | None = None
    try:
        async for chunk in chunks:
            if not response.prepared:
                await response.prepare(request)
            received.append(chunk)
            try:
                await response.write(encode_event(chunk))
            except ConnectionError as exc:  # the agent went away
                failure = (f"the agent disconnected during the stream: {exc}", "agent_disconnected")
                break
    except ProxyHTTPError as exc:
        if not response.prepared:
            raise
        await write_quietly(response, encode_event(exc.body()))
        failure = (exc.message, exc.kind)
    except Exception as exc:
        log_limited(
            logger,
            logging.ERROR,
            ("in_process_stream", replica.label),
            "In-process backend %s failed while streaming",
            replica.label,
            exc_info=True,
        )
        if not response.prepared:
            raise _failure(replica, exc) from None
        error = _failure(replica, exc)
        await write_quietly(response, encode_event(error.body()))
        failure = (error.message, error.kind)
    finally:
        if exchange is not None:  # also when the agent left and the handler was cancelled
            exchange.status = 200
            exchange.response = (
                assemble_chat(received) if operation == "chat" else assemble_completion(received)
            )
        close = getattr(chunks, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()
    if not response.prepared:
        await response.prepare(request)
    if failure is None:
        await write_quietly(response, DONE_EVENT)
    await end_quietly(response)
    if exchange is not None and failure is not None:
        exchange.error, exchange.error_type = failure
    return response
