"""The proxy's aiohttp application: routes, request validation, auth, and the request handlers.

Routes (each also without ``/v1``, and each also under ``/rollout/{rollout_id}/attempt/{attempt_id}``,
the URL :meth:`agl_core.types.ProxyLLM.get_base_url` builds): ``POST /v1/chat/completions``,
``POST /v1/completions``, ``POST /v1/responses`` (OpenAI Responses), ``POST /v1/messages`` (Anthropic
Messages), ``GET /v1/models``; plus ``GET /health`` (no auth, never probes backends). Responses and
Messages requests are translated to chat completions by the ``agl-proxy-translate`` plugin (501 without
it; see :mod:`agl_core.llm_proxy.client_api`). Only requests under a rollout path are recorded.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

import agl_core.llm_proxy._json as _json
from agl_core.llm_proxy.backends import BackendPool, BackendTable, Replica
from agl_core.llm_proxy.client_api import ClientApi, TranslationNotes, load_client_api
from agl_core.llm_proxy.errors import ProxyHTTPError, error_body
from agl_core.llm_proxy.forward import (
    BufferedResult,
    ForwardContext,
    finish_stream,
    forward_buffered,
    open_stream,
    read_limited,
)
from agl_core.llm_proxy.guard import ProxyGuard
from agl_core.llm_proxy.in_process import answer_in_process
from agl_core.llm_proxy.recorder import SequenceAllocator, SpanRecorder
from agl_core.llm_proxy.recording import Exchange
from agl_core.llm_proxy.request_options import RequestOptions
from agl_core.llm_proxy.streaming import (
    SSE_HEADERS,
    Operation,
    complete_events_end,
    encode_event,
    end_quietly,
    synthesize_sse,
    write_quietly,
)
from agl_core.store.http.connections import answer_request_errors_in_json
from agl_core.utils.http_guard import log_limited

if TYPE_CHECKING:
    from agl_core.store.base import LightningStore

__all__ = ["ProxyServer"]

logger = logging.getLogger("agl_core.llm_proxy")

_JSON = "application/json"
_ROLLOUT_PREFIX = "/rollout/{rollout_id}/attempt/{attempt_id}"
_SEQUENCE_WAIT_S = 5.0


class ProxyServer:
    """Request handling state shared by every handler; :class:`~agl_core.llm_proxy.LLMProxy` owns it.

    ``table`` may be replaced at any time (a backend swap): each request reads it once.
    """

    def __init__(
        self,
        *,
        table: BackendTable,
        ctx: ForwardContext,
        get_store: Callable[[], LightningStore | None],
        token: str | None,
        max_request_bytes: int,
        recorder: SpanRecorder,
        allocator: SequenceAllocator,
        guard: ProxyGuard | None = None,
        options: RequestOptions | None = None,
    ) -> None:
        self.table = table
        self.options = options or RequestOptions()
        self.ctx = ctx
        self.stats = ctx.stats
        self._get_store = get_store
        self._token = token.encode() if token else None
        self.max_request_bytes = max_request_bytes
        self.max_response_bytes = ctx.max_response_bytes
        self.timeout = ctx.timeout
        self.recorder = recorder
        self.allocator = allocator
        self.guard = guard or ProxyGuard()

    # ------------------------------------------------------------------ application

    def build_app(self) -> web.Application:
        """The aiohttp application with every route."""
        from agl_core.metrics.proxy_metrics import ProxyServerMetrics  # imports prometheus_client

        self.metrics = ProxyServerMetrics(self.stats, lambda: self.table, lambda: self.recorder.pending)
        timed = self.metrics.timed
        chat, completions = timed("chat_completions", self._chat), timed("completions", self._completions)
        responses, messages = timed("responses", self._responses), timed("messages", self._messages)
        models = timed("models", self._models)
        app = web.Application(client_max_size=self.max_request_bytes)
        for prefix in ("", _ROLLOUT_PREFIX):
            for version in ("/v1", ""):
                base = prefix + version
                app.router.add_post(base + "/chat/completions", chat)
                app.router.add_post(base + "/completions", completions)
                app.router.add_post(base + "/responses", responses)
                app.router.add_post(base + "/messages", messages)
                app.router.add_get(base + "/models", models)
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_route("*", "/{tail:.*}", self._unknown)
        if self.guard.cors:
            app.on_response_prepare.append(self._cors_headers)
        return app

    def answer_unreadable_requests(self, server: web.Server) -> None:
        """Answer what aiohttp cannot read (an over-long URL or header line) with the OpenAI error body."""
        answer_request_errors_in_json(server, _unreadable_body, _log_unreadable)

    async def _cors_headers(self, request: web.Request, response: web.StreamResponse) -> None:
        self.guard.add_cors_headers(request, response)

    # ------------------------------------------------------------------ small routes

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _metrics(self, request: web.Request) -> web.Response:
        """``GET /metrics`` (Prometheus text format); needs the token when the proxy has one."""
        try:
            self.guard.check(request)
            self._check_auth(request)
        except ProxyHTTPError as exc:
            return exc.response()
        return await self.metrics.handle(request)

    async def _models(self, request: web.Request) -> web.Response:
        try:
            self.guard.check(request)
            self._check_auth(request)
        except ProxyHTTPError as exc:
            return exc.response()
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "agl"}
            for name in self.table.model_names()
        ]
        return web.Response(body=_json.dumps({"object": "list", "data": data}), content_type=_JSON)

    async def _unknown(self, request: web.Request) -> web.Response:
        if request.method == "OPTIONS":
            return self.guard.preflight(request)
        if request.method == "HEAD":  # a client's connection warm-up (Claude Code sends one per run)
            return web.Response(status=200)
        path = request.path.rstrip("/")
        if path.endswith(("/chat/completions", "/completions", "/responses", "/messages", "/models")):
            return ProxyHTTPError(
                405,
                f"{request.method} is not allowed on {request.path}; use POST for completions, responses "
                "and messages, and GET for models.",
                type="invalid_request_error",
                code="method_not_allowed",
            ).response()
        return ProxyHTTPError(
            404,
            f"Unknown path {request.path!r}. The proxy serves /v1/chat/completions, /v1/completions, "
            "/v1/responses, /v1/messages and /v1/models, also under "
            "/rollout/{rollout_id}/attempt/{attempt_id}.",
            type="invalid_request_error",
            code="unknown_url",
        ).response()

    # ------------------------------------------------------------------ request parsing

    def _check_auth(self, request: web.Request) -> None:
        if self._token is None:
            return
        header = request.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), self._token):
            return
        key = request.headers.get("x-api-key")  # what Anthropic's SDK sends
        if key is None or not hmac.compare_digest(key.strip().encode(), self._token):
            raise ProxyHTTPError(
                401,
                "Missing or wrong bearer token: this proxy requires `Authorization: Bearer <token>` or "
                "`x-api-key: <token>` (set api_key=<token> on the OpenAI or Anthropic client).",
                type="invalid_request_error",
                code="invalid_api_key",
            )

    async def _read_payload(
        self, request: web.Request, operation: Operation, api: ClientApi | None = None
    ) -> tuple[dict[str, Any], bytes]:
        self.guard.check_json(request)
        length = request.content_length
        if length is not None and length > self.max_request_bytes:
            raise self._request_too_large()
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise self._request_too_large() from None
        if not raw or raw.isspace():
            raise ProxyHTTPError(
                400, "The request body is empty; send a JSON object with 'model' and 'messages'."
            )
        try:
            payload = _json.loads(raw)
        except ValueError as exc:  # UnicodeDecodeError included
            raise ProxyHTTPError(
                400, f"The request body is not valid JSON: {exc}.", code="invalid_json"
            ) from None
        if _json.too_deep(raw, payload):
            raise ProxyHTTPError(
                400,
                f"The request body nests arrays and objects more than {_json.MAX_DEPTH} levels deep; "
                "flatten it.",
                code="invalid_json",
            )
        if not isinstance(payload, dict):
            raise ProxyHTTPError(
                400, f"The request body must be a JSON object, not {type(payload).__name__}."
            )
        model = payload.get("model")
        if not isinstance(model, str) or not model:
            raise ProxyHTTPError(400, "'model' is required and must be a non-empty string.", param="model")
        if api is not None:
            pass  # the translation checks the rest
        elif operation == "chat":
            messages = payload.get("messages")
            if (
                not isinstance(messages, list)
                or not messages
                or not all(isinstance(m, dict) for m in messages)
            ):
                raise ProxyHTTPError(
                    400,
                    "'messages' is required and must be a non-empty list of message objects.",
                    param="messages",
                )
        else:
            prompt = payload.get("prompt")
            if not isinstance(prompt, (str, list)) or (isinstance(prompt, list) and not prompt):
                raise ProxyHTTPError(
                    400,
                    "'prompt' is required and must be a string, a list of strings or a list of token ids.",
                    param="prompt",
                )
        stream = payload.get("stream")
        if stream is not None and not isinstance(stream, bool):
            raise ProxyHTTPError(400, f"'stream' must be true or false, got {stream!r}.", param="stream")
        return payload, raw

    def _request_too_large(self) -> ProxyHTTPError:
        return ProxyHTTPError(
            413,
            f"The request body is larger than the proxy's limit of {self.max_request_bytes} bytes; "
            "raise max_request_bytes or send less.",
            code="request_too_large",
        )

    def _pool(self, model: str) -> BackendPool:
        pool = self.table.pool_for(model)
        if pool is None:
            raise ProxyHTTPError(
                404,
                f"The model {model!r} is not served by this proxy; available models: "
                f"{self.table.model_names()}.",
                type="invalid_request_error",
                code="model_not_found",
                param="model",
            )
        return pool

    # ------------------------------------------------------------------ completions

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "chat")

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "text_completion")

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "chat", "responses")

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "chat", "messages")

    async def _handle(
        self, request: web.Request, operation: Operation, route: str | None = None
    ) -> web.StreamResponse:
        self.stats.requests += 1
        start = time.time()
        original: dict[str, Any] | None = None
        payload: dict[str, Any] | None = None
        api: ClientApi | None = None
        notes: TranslationNotes | None = None
        info = request.match_info
        rollout_id = info.get("rollout_id")
        authorized = False
        try:
            self.guard.check(request)
            self._check_auth(request)
            authorized = True
            if route is not None:
                api = load_client_api(route)
                notes = api.new_notes(self.options.refuse_hosted_tools)
            payload, raw = await self._read_payload(request, operation, api)
            if api is not None and notes is not None:
                original, payload = payload, api.to_chat(payload, notes)
            applied = self.options.apply(payload)
            if api is not None or applied is not payload:
                payload, raw = applied, _json.dumps(applied)
            pool = self._pool(payload["model"])
        except ProxyHTTPError as exc:
            self.stats.requests_failed += 1
            if authorized and rollout_id is not None and self._get_store() is not None:
                await self._record_refusal(request, operation, api, original or payload, exc, start)
            return exc.response() if api is None else api.error_response(exc)
        if rollout_id is None or self._get_store() is None:
            self.stats.requests_unrecorded += 1
            if rollout_id is not None:
                logger.debug("Not recording a request of rollout %s: the proxy has no store", rollout_id)
            elif logger.isEnabledFor(logging.DEBUG):
                logger.debug("Not recording %s: not under /rollout/{rid}/attempt/{aid}", request.path)
            return await self._answer(
                request, operation, pool, payload, raw, None, None, api, original, notes
            )
        attempt_id = info["attempt_id"]
        side_call = self.options.side_call(original if original is not None else payload)
        if side_call is not None and self.options.side_calls == "drop":
            self.stats.requests_unrecorded += 1
            return await self._answer(
                request, operation, pool, payload, raw, None, None, api, original, notes
            )
        sequence = self.allocator.allocate(rollout_id, attempt_id)
        exchange = Exchange(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            sequence_id=None,
            operation=operation,
            request=payload,
            status=0,
            start_time=start,
            end_time=start,
            backend="",
            stream=payload.get("stream") is True,
            traceparent=request.headers.get("traceparent"),
            client_api=api.name if api is not None else None,
            dropped=(notes.dropped or None) if notes is not None else None,
            side_call=side_call,
        )
        self.recorder.reserve()
        submitted = False
        try:
            response = await self._answer(
                request, operation, pool, payload, raw, exchange, sequence, api, original, notes
            )
            exchange.end_time = time.time()
            if not exchange.status:
                exchange.status = response.status
            try:
                exchange.sequence_id = await self._sequence_id(sequence)
            finally:
                self.recorder.submit(exchange, reserved=True)
                submitted = True
            return response
        finally:
            if not submitted:  # the agent went away (the handler was cancelled): record that, no waiting
                exchange.end_time = time.time()
                exchange.status = exchange.status or 499
                exchange.error = "the agent disconnected before the answer was complete"
                exchange.error_type = "agent_disconnected"
                exchange.sequence_id = (
                    sequence.result() if sequence.done() and not sequence.cancelled() else None
                )
                self.stats.requests_failed += 1
                self.recorder.submit(exchange, reserved=True)

    async def _record_refusal(
        self,
        request: web.Request,
        operation: Operation,
        api: ClientApi | None,
        payload: dict[str, Any] | None,
        exc: ProxyHTTPError,
        start: float,
    ) -> None:
        """Record a request the proxy itself refused (its own 4xx) as a failed span: status and reason.

        Only the model name of the request is kept (the body may be what was wrong with it).
        """
        info = request.match_info
        model = payload.get("model") if isinstance(payload, dict) else None
        exchange = Exchange(
            rollout_id=info["rollout_id"],
            attempt_id=info["attempt_id"],
            sequence_id=None,
            operation=operation,
            request={"model": model} if isinstance(model, str) else {},
            status=exc.status,
            start_time=start,
            end_time=time.time(),
            backend="",
            traceparent=request.headers.get("traceparent"),
            client_api=api.name if api is not None else None,
            error=exc.message,
            error_type=exc.kind,
            refused=True,
        )
        sequence = self.allocator.allocate(exchange.rollout_id, exchange.attempt_id)
        self.recorder.reserve()
        try:
            exchange.sequence_id = await self._sequence_id(sequence)
        finally:
            self.recorder.submit(exchange, reserved=True)

    async def _answer(
        self,
        request: web.Request,
        operation: Operation,
        pool: BackendPool,
        payload: dict[str, Any],
        raw: bytes,
        exchange: Exchange | None,
        sequence: asyncio.Future[int | None] | None,
        api: ClientApi | None = None,
        original: dict[str, Any] | None = None,
        notes: TranslationNotes | None = None,
    ) -> web.StreamResponse:
        """Forward the request and build the agent's answer; errors become OpenAI-style responses."""
        proxy_fault = False
        try:
            if api is not None and original is not None and notes is not None:
                response = await api.answer(request, self.ctx, pool, original, payload, raw, exchange, notes)
            elif pool.in_process:
                response = await answer_in_process(request, operation, pool, payload, exchange, self.timeout)
            elif payload.get("stream") is True and pool.streaming:
                response = await self._http_stream(request, operation, pool, payload, raw, exchange, sequence)
            else:
                response = await self._http_buffered(operation, pool, payload, raw, exchange)
        except ProxyHTTPError as exc:
            response = exc.response() if api is None else api.error_response(exc)
            if exchange is not None:
                exchange.status, exchange.error, exchange.error_type = exc.status, exc.message, exc.kind
        except Exception as exc:  # a bug in the proxy: answer 500 in OpenAI's shape and keep serving
            log_limited(
                logger,
                logging.ERROR,
                ("proxy_error", type(exc).__name__),
                "LLM proxy failed on a %s request",
                operation,
                exc_info=True,
            )
            proxy_fault = True
            message = f"The LLM proxy failed: {type(exc).__name__}: {exc}"
            failure = ProxyHTTPError(500, message, code="proxy_error")
            response = failure.response() if api is None else api.error_response(failure)
            if exchange is not None:
                exchange.status, exchange.error, exchange.error_type = 500, message, "proxy_error"
        if response.status >= 400:
            self.stats.requests_failed += 1
            if response.status >= 500 and not proxy_fault:
                self.stats.backend_errors += 1
        return response

    async def _sequence_id(self, future: asyncio.Future[int | None]) -> int | None:
        """The allocated sequence id; None (the writer allocates one later) if the store is slow or failed."""
        if future.done():
            return future.result()
        try:
            return await asyncio.wait_for(asyncio.shield(future), _SEQUENCE_WAIT_S)
        except asyncio.TimeoutError:
            self.stats.sequence_id_errors += 1
            logger.warning(
                "The store took over %.0fs to issue a span sequence id; recording continues.",
                _SEQUENCE_WAIT_S,
            )
            return None

    async def _http_buffered(
        self,
        operation: Operation,
        pool: BackendPool,
        payload: dict[str, Any],
        raw: bytes,
        exchange: Exchange | None,
    ) -> web.StreamResponse:
        """Non-streaming request, or a streaming one for a pool that cannot stream (SSE synthesized)."""
        synthesize = payload.get("stream") is True
        result = await forward_buffered(
            self.ctx, pool, operation, payload, raw, stream=False if synthesize else None
        )
        if exchange is not None:
            self._note_result(exchange, result)
        if synthesize and result.status < 400:
            return self._synthesized(result, operation, payload, exchange)
        return web.Response(
            body=result.body, status=result.status, headers={"Content-Type": result.content_type}
        )

    def _synthesized(
        self, result: BufferedResult, operation: Operation, payload: dict[str, Any], exchange: Exchange | None
    ) -> web.Response:
        try:
            parsed = _json.loads(result.body)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise ProxyHTTPError(
                502,
                f"Backend {result.replica.label} answered with a body that is not a JSON object.",
                code="bad_gateway",
            )
        include_usage = bool((payload.get("stream_options") or {}).get("include_usage"))
        if exchange is not None:
            exchange.synthesized = True
        return web.Response(body=synthesize_sse(parsed, operation, include_usage), headers=SSE_HEADERS)

    @staticmethod
    def _note_result(exchange: Exchange, result: BufferedResult) -> None:
        exchange.status = result.status
        exchange.backend = result.replica.label
        exchange.attempts = result.attempts
        exchange.response_body = result.body
        if result.status >= 400:
            exchange.error = result.error
            exchange.error_type = str(result.status)

    async def _http_stream(
        self,
        request: web.Request,
        operation: Operation,
        pool: BackendPool,
        payload: dict[str, Any],
        raw: bytes,
        exchange: Exchange | None,
        sequence: asyncio.Future[int | None] | None,
    ) -> web.StreamResponse:
        """Stream the backend's SSE to the agent as it arrives, keeping a copy for the record."""
        upstream, error, replica, attempts = await open_stream(self.ctx, pool, operation, payload, raw)
        if error is not None:
            if exchange is not None:
                self._note_result(exchange, error)
            return web.Response(
                body=error.body, status=error.status, headers={"Content-Type": error.content_type}
            )
        assert upstream is not None
        if exchange is not None:
            exchange.backend, exchange.attempts, exchange.status = replica.label, attempts, upstream.status
        try:
            content_type = upstream.headers.get("Content-Type", "")
            if not content_type.startswith("text/event-stream"):
                # The backend ignored ``stream``: answer the JSON it sent as a synthesized stream.
                try:
                    body = await read_limited(upstream, self.max_response_bytes)
                except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                    raise ProxyHTTPError(
                        502,
                        f"Backend {replica.label} broke off its answer: {exc}",
                        code="backend_unavailable",
                    ) from None
                result = BufferedResult(upstream.status, body, content_type, replica, attempts)
                if exchange is not None:
                    self._note_result(exchange, result)
                return self._synthesized(result, operation, payload, exchange)
            if sequence is not None and not sequence.done():
                await asyncio.wait([sequence], timeout=_SEQUENCE_WAIT_S)
            response = web.StreamResponse(status=upstream.status, headers=SSE_HEADERS)
            await response.prepare(request)
            copy: list[bytes] | None = [] if exchange is not None else None
            try:
                failure = await self._pump(upstream, response, copy, replica)
            finally:  # also when the agent left and the handler was cancelled: keep what was streamed
                if exchange is not None:
                    exchange.sse = True
                    exchange.response_body = b"".join(copy or ())
            await end_quietly(response)
        finally:
            finish_stream(replica, upstream)
        if exchange is not None and failure is not None:
            exchange.error, exchange.error_type = failure
        return response

    async def _pump(
        self,
        upstream: aiohttp.ClientResponse,
        response: web.StreamResponse,
        copy: list[bytes] | None,
        replica: Replica,
    ) -> tuple[str, str] | None:
        """Copy the backend's events to the agent (whole events only); the failure and its kind, if any.

        A backend that breaks off or sends too much gets the stream ended with an OpenAI error event; an
        agent that goes away just stops the copy.
        """
        size, limit = 0, self.max_response_bytes
        tail = b""  # the start of an event whose end has not arrived yet
        try:
            async for received in upstream.content.iter_any():
                size += len(received)
                if size > limit:
                    failure = f"the backend's stream exceeded the proxy's limit of {limit} bytes"
                    await write_quietly(
                        response, encode_event(error_body(failure, code="response_too_large"))
                    )
                    return failure, "response_too_large"
                if copy is not None:
                    copy.append(received)
                chunk = tail + received if tail else received
                end = complete_events_end(chunk)
                chunk, tail = (chunk, b"") if end == len(chunk) else (chunk[:end], chunk[end:])
                if chunk:
                    try:
                        await response.write(chunk)
                    except ConnectionError as exc:  # includes aiohttp's ClientConnectionResetError
                        return f"the agent disconnected during the stream: {exc}", "agent_disconnected"
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            failure = f"the backend's stream broke off: {type(exc).__name__}: {exc}"
            log_limited(
                logger,
                logging.WARNING,
                ("stream_broke", replica.label),
                "Stream from %s broke off: %s",
                replica.label,
                failure,
            )
            await write_quietly(response, encode_event(error_body(failure, code="stream_interrupted")))
            return failure, "stream_interrupted"
        if tail:
            await write_quietly(response, tail)
        return None


def _unreadable_body(status: int, kind: str, message: str) -> bytes:
    error_type = "server_error" if status >= 500 else "invalid_request_error"
    return _json.dumps(error_body(message, type=error_type, code=kind))


def _log_unreadable(status: int, exc: BaseException | None, request: web.BaseRequest) -> None:
    kind = type(exc).__name__ if exc is not None else f"HTTP {status}"
    log_limited(
        logger, logging.WARNING, ("unreadable", kind), "LLM proxy: unreadable request (%s): %s", kind, exc
    )
