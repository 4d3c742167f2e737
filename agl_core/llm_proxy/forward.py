"""Sending one request to a backend: body rewriting, replica choice, failover and error mapping.

Retries go to another replica (when the pool has one) and happen only on connection failures — refused
or reset connections, a server that disconnected or a connect timeout — and only while nothing has been
sent to the agent. HTTP error statuses from a backend are answered as they are (never retried); a read
timeout is answered 504 without retry, since the backend may still be generating.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from yarl import URL

import agl_core.llm_proxy._json as _json
from agl_core.llm_proxy.backends import BackendPool, Replica
from agl_core.llm_proxy.errors import ProxyHTTPError, normalize_upstream_error
from agl_core.llm_proxy.stats import ProxyStats
from agl_core.llm_proxy.streaming import Operation

__all__ = [
    "BufferedResult",
    "ForwardContext",
    "finish_stream",
    "forward_buffered",
    "open_stream",
    "read_limited",
    "upstream_body",
]

logger = logging.getLogger(__name__)

_RETRYABLE = (
    aiohttp.ClientConnectorError,
    aiohttp.ConnectionTimeoutError,
    aiohttp.ServerDisconnectedError,
    aiohttp.ClientOSError,
    aiohttp.ClientPayloadError,
)
_READ_TIMEOUTS = (aiohttp.SocketTimeoutError, asyncio.TimeoutError)


@dataclass(slots=True)
class ForwardContext:
    """What forwarding needs from the proxy: the HTTP client, limits and counters."""

    session: aiohttp.ClientSession
    stats: ProxyStats
    max_retries: int = 2
    failure_cooldown: float = 5.0
    max_response_bytes: int = 64 * 1024 * 1024
    timeout: float = 600.0


@dataclass(slots=True)
class BufferedResult:
    """A complete backend answer: status, body bytes, content type, and who answered after how many tries."""

    status: int
    body: bytes
    content_type: str
    replica: Replica
    attempts: int
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def upstream_body(
    replica: Replica, operation: Operation, payload: dict[str, Any], raw: bytes, stream: bool | None = None
) -> bytes:
    """The body to send to an HTTP replica.

    Adds ``return_token_ids``/``logprobs`` per the backend's flags when the agent did not set them,
    rewrites ``model`` when the backend names it differently, lowers ``max_tokens`` to the backend's
    cap, and forces ``stream`` to ``stream`` when given. Without a rewrite the agent's bytes are kept and
    the additions are spliced in front, so the body is not re-serialized.
    """
    http = replica.http
    assert http is not None
    add_ids = http.return_token_ids and "return_token_ids" not in payload
    add_logprobs = http.logprobs and "logprobs" not in payload
    cap = _capped_tokens(http.max_tokens, payload) if http.max_tokens is not None else None
    rewrite = (
        (http.model is not None and payload.get("model") != http.model)
        or (stream is not None and bool(payload.get("stream")) != stream)
        or cap is not None
    )
    if rewrite:
        body = dict(payload)
        if cap is not None:
            body.pop("max_completion_tokens", None)
            body["max_tokens"] = cap
        if add_ids:
            body["return_token_ids"] = True
        if add_logprobs:
            body["logprobs"] = True if operation == "chat" else 0
        if http.model is not None:
            body["model"] = http.model
        if stream is not None:
            body["stream"] = stream
            if not stream:
                body.pop("stream_options", None)
        return _json.dumps(body)
    if not (add_ids or add_logprobs):
        return raw
    return _SPLICES[(add_ids, add_logprobs, operation)] + raw[raw.find(b"{") + 1 :]


def _capped_tokens(cap: int, payload: dict[str, Any]) -> int | None:
    """``cap`` when the request asks for more tokens than it (or sets no limit), else None."""
    asked = payload.get("max_completion_tokens", payload.get("max_tokens"))
    if type(asked) is int and asked <= cap:
        return None
    return cap


# What upstream_body puts in front of the agent's body (after its opening brace), by
# (add return_token_ids, add logprobs, operation).
_SPLICES: dict[tuple[bool, bool, str], bytes] = {
    (ids, logprobs, operation): b"{"
    + b"".join(
        part
        for part, wanted in (
            (b'"return_token_ids":true,', ids),
            (b'"logprobs":true,' if operation == "chat" else b'"logprobs":0,', logprobs),
        )
        if wanted
    )
    for ids in (True, False)
    for logprobs in (True, False)
    for operation in ("chat", "text_completion")
}


async def read_limited(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """Read a response body, failing with 502 when it is larger than ``limit`` bytes."""
    length = response.content_length
    if length is not None and length <= limit:
        return await response.read()
    if length is not None:
        response.close()
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > limit:
            response.close()
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> ProxyHTTPError:
    return ProxyHTTPError(
        502,
        f"The model backend's response is larger than the proxy's limit of {limit} bytes; raise "
        "max_response_bytes or ask for fewer tokens.",
        code="response_too_large",
    )


def _mark_failed(ctx: ForwardContext, replica: Replica, exc: BaseException, model: str) -> None:
    """Count a connection failure and cool the replica down (logged once per cool-down)."""
    now = time.monotonic()
    was_healthy = replica.down_until <= now
    replica.failures += 1
    replica.down_until = now + ctx.failure_cooldown
    logger.log(
        logging.WARNING if was_healthy else logging.DEBUG,
        "Backend %s for model %r failed (%s: %s); avoiding it for %.1fs",
        replica.label,
        model,
        type(exc).__name__,
        exc,
        ctx.failure_cooldown,
    )


def _unavailable(model: str, tried: list[Replica], last: BaseException | None) -> ProxyHTTPError:
    names = ", ".join(r.label for r in tried) or "none"
    reason = f"{type(last).__name__}: {last}" if last is not None else "no backend could be tried"
    return ProxyHTTPError(
        502,
        f"No backend for model {model!r} could be reached (tried {names}; last error {reason}).",
        code="backend_unavailable",
    )


def _timeout(model: str, replica: Replica, timeout: float) -> ProxyHTTPError:
    return ProxyHTTPError(
        504,
        f"Backend {replica.label} did not answer the request for model {model!r} within {timeout:g}s.",
        code="backend_timeout",
    )


def _shutting_down() -> ProxyHTTPError:
    return ProxyHTTPError(
        503, "The LLM proxy is shutting down; retry against a running proxy.", code="shutting_down"
    )


def _tries(
    ctx: ForwardContext, pool: BackendPool, operation: Operation, tried: list[Replica]
) -> Iterator[tuple[int, Replica, URL]]:
    """``(attempt, replica, url)`` in failover order, each replica appended to ``tried``: an untried one,
    or any when all were tried (a stale keep-alive connection)."""
    for attempt in range(ctx.max_retries + 1):
        replica = pool.pick(tried)
        if replica is None and tried:
            replica = pool.pick(())
        if replica is None or replica.http is None:
            return
        if ctx.session.closed:
            raise _shutting_down()
        if attempt:
            ctx.stats.retries += 1
        tried.append(replica)
        url = replica.chat_url if operation == "chat" else replica.completions_url
        assert url is not None  # set for every HTTP replica
        yield attempt, replica, url


def error_result(status: int, body: bytes, replica: Replica, attempts: int) -> BufferedResult:
    """A buffered result for a backend's HTTP error, with the body normalized to OpenAI's error shape."""
    normalized = normalize_upstream_error(status, body)
    out = normalized if normalized is not None else body
    try:
        message = _json.loads(out)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = None
    return BufferedResult(
        status,
        out,
        "application/json",
        replica,
        attempts,
        error=str(message) if message else f"HTTP {status}",
    )


async def forward_buffered(
    ctx: ForwardContext,
    pool: BackendPool,
    operation: Operation,
    payload: dict[str, Any],
    raw: bytes,
    stream: bool | None = None,
) -> BufferedResult:
    """Send a request to HTTP replicas of ``pool`` with failover and read the whole answer.

    Raises:
        ProxyHTTPError: 502 when no replica could be reached or the answer is too large, 504 on a read
            timeout.
    """
    model = str(payload.get("model"))
    tried: list[Replica] = []
    last: BaseException | None = None
    for attempt, replica, url in _tries(ctx, pool, operation, tried):
        body = upstream_body(replica, operation, payload, raw, stream)
        replica.in_flight += 1
        replica.requests += 1
        try:
            async with ctx.session.post(url, data=body, headers=replica.request_headers) as response:
                data = await read_limited(response, ctx.max_response_bytes)
                status = response.status
                content_type = response.headers.get("Content-Type", "application/json")
        except _RETRYABLE as exc:
            _mark_failed(ctx, replica, exc, model)
            last = exc
            continue
        except _READ_TIMEOUTS:
            raise _timeout(model, replica, ctx.timeout) from None
        finally:
            replica.in_flight -= 1
        if status >= 400:
            return error_result(status, data, replica, attempt + 1)
        return BufferedResult(status, data, content_type, replica, attempt + 1)
    raise _unavailable(model, tried, last)


async def open_stream(
    ctx: ForwardContext, pool: BackendPool, operation: Operation, payload: dict[str, Any], raw: bytes
) -> tuple[aiohttp.ClientResponse | None, BufferedResult | None, Replica, int]:
    """Open a streaming request with failover, up to the response headers.

    Returns ``(response, None, replica, attempts)`` for a 2xx answer, whose body the caller streams and
    then releases (the replica's ``in_flight`` stays raised until :func:`finish_stream`), or
    ``(None, result, replica, attempts)`` for an HTTP error answer (read in full).

    Raises:
        ProxyHTTPError: as :func:`forward_buffered`.
    """
    model = str(payload.get("model"))
    tried: list[Replica] = []
    last: BaseException | None = None
    for attempt, replica, url in _tries(ctx, pool, operation, tried):
        body = upstream_body(replica, operation, payload, raw)
        replica.in_flight += 1
        replica.requests += 1
        try:
            response = await ctx.session.post(url, data=body, headers=replica.request_headers)
        except _RETRYABLE as exc:
            replica.in_flight -= 1
            _mark_failed(ctx, replica, exc, model)
            last = exc
            continue
        except _READ_TIMEOUTS:
            replica.in_flight -= 1
            raise _timeout(model, replica, ctx.timeout) from None
        except BaseException:
            replica.in_flight -= 1
            raise
        if response.status >= 400:
            try:
                data = await read_limited(response, ctx.max_response_bytes)
            except _RETRYABLE as exc:
                _mark_failed(ctx, replica, exc, model)
                last = exc
                continue
            finally:
                response.release()
                replica.in_flight -= 1
            return None, error_result(response.status, data, replica, attempt + 1), replica, attempt + 1
        return response, None, replica, attempt + 1
    raise _unavailable(model, tried, last)


def finish_stream(replica: Replica, response: aiohttp.ClientResponse) -> None:
    """Release a streamed response opened by :func:`open_stream`."""
    response.release()
    replica.in_flight -= 1
