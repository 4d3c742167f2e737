"""`LightningStoreServer`: serve any `LightningStore` over HTTP (aiohttp) for runners elsewhere.

Each route of `agl_core.store.http.routes.ROUTES` is a plain aiohttp handler wrapped once with the
request guard (`agl_core.utils.http_guard.RequestGuard`), the token check, idempotent replay for
mutating routes and error mapping -- no middleware chain, so the per-request overhead stays small.
Unknown paths get a JSON 404, known paths with a wrong method a JSON 405 (with ``Allow``), and CORS
preflights are answered when CORS is on.

Differences from Agent Lightning 0.3 (quirk 1 in docs/migrating-from-agent-lightning.md): store errors are
4xx with a typed JSON
body (unknown id 404, bad argument 400, schema mismatch 422, oversized body 413) and only genuine
server faults are 500, so clients never retry a caller's mistake; the server binds 127.0.0.1 by
default and can require a bearer token; ``wait_for_rollouts`` long-polls on the server (one poll is
capped at ``max_wait_seconds``). As in 0.3 the server is itself a `LightningStore`: calls on it go to
the wrapped store (see `agl_core.store.delegating`), so it can be handed to an algorithm or
``LLMProxy(store=server)``.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

from agl_core._moved03 import store_server_03_arguments
from agl_core.dashboard import add_dashboard_routes
from agl_core.store.base import LightningStore
from agl_core.store.delegating import DelegatingLightningStore
from agl_core.store.http.connections import ACCEPT_BURST, CONNECTIONS, ConnectionTracker
from agl_core.store.http.errors import error_payload, status_for_exception
from agl_core.store.http.handlers import StoreApi, json_response
from agl_core.store.http.idempotency import CachedResponse, IdempotencyCache
from agl_core.store.http.routes import OTLP_TRACES_PATH, ROUTES, Route
from agl_core.utils.http_guard import HostRule, LogLimiter, Refusal, RequestGuard, log_limited

__all__ = [
    "DEFAULT_BODY_TIMEOUT_SECONDS",
    "DEFAULT_HEADER_TIMEOUT_SECONDS",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_WAIT_SECONDS",
    "LightningStoreServer",
]

DEFAULT_HEADER_TIMEOUT_SECONDS = 30.0
"""Seconds a connection gets to send a request head, first or later (see `connections.ConnectionTracker`)."""

DEFAULT_BODY_TIMEOUT_SECONDS = 60.0
"""Seconds a request gets to send its whole body once its head has arrived (then 408)."""

logger = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
"""Default limit of a request body (32 MiB)."""

DEFAULT_MAX_WAIT_SECONDS = 30.0
"""Default cap of one ``wait_for_rollouts`` long poll."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_IDEMPOTENCY_HEADER = "Idempotency-Key"
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_JSON_TYPES = frozenset({"application/json"})
_OTLP_TYPES = frozenset({"application/json", "application/x-protobuf", "application/protobuf"})
_MAX_KEY_LENGTH = 200


def _path_regex(path: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\{\w+\\}", "[^/]+", re.escape(path)) + "$")


class LightningStoreServer(DelegatingLightningStore):
    """An HTTP server exposing `store` under ``/v1/agl`` plus OTLP/HTTP traces at ``/v1/traces``.

    Use it in process (``await server.start()`` ... ``await server.stop()``, or `run_forever()`), or
    from the command line with ``agl store serve``. The server does not own the store: `stop()` does
    not close it.

    Args:
        store: The store to serve; it must be safe for concurrent use from one event loop.
        host: Interface to bind; 127.0.0.1 by default (use 0.0.0.0 to accept other machines, with a token).
        port: TCP port; 0 picks a free one (read it back from `port` / `endpoint`).
        token: When set, every route except ``/health`` and ``/v1/agl/health`` requires
            ``Authorization: Bearer <token>`` (compared in constant time).
        cors_origins: Browser origins allowed to call the API (``"*"`` allows all); None turns CORS off.
        max_body_bytes: Largest accepted request body; bigger ones get 413.
        max_wait_seconds: Cap of one ``wait_for_rollouts`` long poll.
        idempotency_entries: How many answers of mutating requests are kept for retried requests.
        shutdown_timeout: Seconds `stop()` waits for in-flight requests before cancelling them.
        allowed_hosts: Host header names accepted besides the loopback ones when bound to loopback
            (DNS-rebinding guard, see `agl_core.utils.http_guard.HostRule`); ``"*"`` accepts any.
        header_timeout: Seconds a connection gets to send a complete request head (the first and each
            later one on a kept-alive connection) before it is closed.
        body_timeout: Seconds a request gets to send its whole body once its head arrived; then 408
            and the connection is closed.
        max_connections: Most open connections; beyond it the connection that waited longest for its
            request is closed (one log line a minute says so). None: the open-file limit less 64.
        cors_allow_origins, launch_mode, launcher_args, n_workers, tracker: Agent Lightning 0.3's
            arguments, see `agl_core._moved03.STORE_SERVER_03`.
    """

    def __init__(
        self,
        store: LightningStore,
        host: str = "127.0.0.1",
        port: int | None = 0,
        *,
        token: str | None = None,
        cors_origins: Sequence[str] | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_wait_seconds: float = DEFAULT_MAX_WAIT_SECONDS,
        idempotency_entries: int = 10_000,
        shutdown_timeout: float = 10.0,
        allowed_hosts: Sequence[str] | None = None,
        header_timeout: float = DEFAULT_HEADER_TIMEOUT_SECONDS,
        body_timeout: float = DEFAULT_BODY_TIMEOUT_SECONDS,
        max_connections: int | None = None,
        cors_allow_origins: Sequence[str] | str | None = None,
        launch_mode: str | None = None,
        launcher_args: object = None,
        n_workers: int = 1,
        tracker: object = None,
    ) -> None:
        super().__init__()
        port, cors_origins = store_server_03_arguments(
            port, cors_origins, cors_allow_origins, launch_mode, launcher_args, n_workers, tracker
        )
        if max_body_bytes <= 0:
            raise ValueError(f"max_body_bytes must be > 0, got {max_body_bytes}.")
        if max_wait_seconds <= 0:
            raise ValueError(f"max_wait_seconds must be > 0, got {max_wait_seconds}.")
        self.store = store
        self.host = host
        self._requested_port = port
        self._bound_port: int | None = None
        self._expected_auth = token.encode() if token else None
        origins = [o.strip().rstrip("/") for o in cors_origins or () if o.strip()]
        self._cors_all = "*" in origins
        self._cors_origins = frozenset(origins) if cors_origins is not None else None
        self.max_body_bytes = max_body_bytes
        self.shutdown_timeout = shutdown_timeout
        from agl_core.metrics.store_metrics import SpanCountingStore, StoreServerMetrics  # prometheus_client

        self.metrics = StoreServerMetrics(store)
        """Prometheus metrics served at ``GET /metrics`` (token required when the server has one)."""
        counted = SpanCountingStore(store, self.metrics.count_spans)
        self.api = StoreApi(counted, max_body_bytes=max_body_bytes, max_wait_seconds=max_wait_seconds)
        self._idempotency = IdempotencyCache(max_entries=idempotency_entries)
        self._patterns = [(_path_regex(route.path), route.method) for route in ROUTES]
        extra = {h.strip().lower() for h in allowed_hosts or () if h.strip()}
        hosts = HostRule(_LOOPBACK_HOSTS | extra | {host.lower()}, any_host=host not in _LOOPBACK_HOSTS)
        self._guard = RequestGuard(hosts, self._origin_allowed, host_status=421, same_origin_ok=True)
        self.connections = ConnectionTracker(
            header_timeout=header_timeout,
            body_timeout=body_timeout,
            max_connections=max_connections,
            logger=logger,
        )
        """The connection bounds: slow heads and bodies, the connection cap (counts ``closed_*``)."""
        self._error_log = LogLimiter(burst=1)
        self._runner: web.AppRunner | None = None
        self._stopped = asyncio.Event()
        self.app = self._build_app()

    # ------------------------------------------------------------------------------ properties

    @property
    def port(self) -> int:
        """The bound port (the requested one before `start()`)."""
        return self._bound_port if self._bound_port is not None else self._requested_port

    @property
    def endpoint(self) -> str:
        """Base URL clients use, e.g. ``http://127.0.0.1:4747`` (a wildcard host maps to 127.0.0.1)."""
        host = self.host
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1"
        elif ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def running(self) -> bool:
        """True between `start()` and `stop()`."""
        return self._runner is not None

    # ------------------------------------------------------------------------------ app

    def _build_app(self) -> web.Application:
        # No middlewares (see the module docstring): the dashboard and the fallback get the guard too.
        app = web.Application(client_max_size=self.max_body_bytes)
        app[CONNECTIONS] = self.connections
        guarded = self._guarded
        for route in ROUTES:
            handler = self._wrap(route, self.api.handler(route))
            app.router.add_route(route.method, route.path, handler)
            if route.method == "GET" and route.path.endswith("/health"):
                app.router.add_route("HEAD", route.path, handler)
        metrics_route = Route(name="metrics", method="GET", path="/metrics", summary="Prometheus metrics.")
        app.router.add_get("/metrics", self._wrap(metrics_route, self.metrics.handle))
        add_dashboard_routes(app.router, guarded)  # the read-only dashboard at / and the API docs at /docs
        app.router.add_route("*", "/{tail:.*}", guarded(self._fallback))
        if self._cors_origins is not None:
            app.on_response_prepare.append(self._add_cors_headers)
        app.on_shutdown.append(self._on_shutdown)
        return app

    def _wrap(self, route: Route, handler: Handler) -> Handler:
        needs_auth = route.auth and self._expected_auth is not None
        mutating = route.mutating
        expected = self._expected_auth
        cache = self._idempotency
        observe = self.metrics.observer(route.name)
        clock = time.perf_counter
        screen = self._screen

        async def endpoint(request: web.Request) -> web.StreamResponse:
            refusal = screen(request)  # the request guard (see `_build_app`)
            if refusal is not None:
                return refusal
            started = clock()
            try:
                if needs_auth:
                    scheme, _, given = request.headers.get("Authorization", "").strip().partition(" ")
                    if scheme.lower() != "bearer" or not hmac.compare_digest(
                        given.strip().encode(),
                        expected,  # type: ignore[arg-type]
                    ):
                        return self._unauthorized()
                if mutating:
                    key = request.headers.get(_IDEMPOTENCY_HEADER)
                    if key:
                        return await self._replay_or_run(cache, (request.raw_path, key), request, handler)
                return await handler(request)
            except Exception as exc:
                return self._error_response(exc, request)
            finally:
                observe(clock() - started)

        endpoint.__name__ = route.name
        return endpoint

    def _screen(self, request: web.Request) -> web.Response | None:
        """The refusal of the request guard in the store's error shape, or None when `request` may go on."""
        method = request.method
        health = method == "OPTIONS" or (method in ("GET", "HEAD") and request.path.endswith("/health"))
        refusal = self._guard.check(request, any_origin=health) or RequestGuard.check_encoding(request)
        if refusal is None and method in _MUTATING:
            allowed = _OTLP_TYPES if request.path.endswith(OTLP_TRACES_PATH) else _JSON_TYPES
            refusal = RequestGuard.check_content_type(request, allowed, only_with_body=True)
        return None if refusal is None else _refusal_response(refusal, request)

    def _guarded(self, handler: Handler) -> Handler:
        """`handler` behind the request guard (the dashboard's routes and the fallback)."""
        screen = self._screen

        async def guarded_handler(request: web.Request) -> web.StreamResponse:
            refusal = screen(request)
            return refusal if refusal is not None else await handler(request)

        return guarded_handler

    async def _replay_or_run(
        self, cache: IdempotencyCache, key: tuple[str, str], request: web.Request, handler: Handler
    ) -> web.StreamResponse:
        if len(key[1]) > _MAX_KEY_LENGTH:
            raise ValueError(f"The {_IDEMPOTENCY_HEADER} header is longer than {_MAX_KEY_LENGTH} characters.")
        while cache.known(key):
            previous = await cache.lookup(key)
            if previous is not None:
                return _replay(previous)
            # The first request with this key failed; run this one unless another retry got there first.
        cache.begin(key)
        cached: CachedResponse | None = None
        try:
            response = await handler(request)
            if (
                isinstance(response, web.Response)
                and response.status < 500
                and isinstance(response.body, bytes)
            ):
                cached = CachedResponse(response.status, response.body)
            return response
        finally:
            cache.finish(key, cached)

    def _unauthorized(self) -> web.Response:
        response = json_response(
            {
                "error": {
                    "type": "StoreAuthenticationError",
                    "message": "This store requires 'Authorization: Bearer <token>'; the request had a "
                    "missing "
                    "or wrong token. Pass token=... to LightningStoreClient or set AGL_STORE_TOKEN.",
                    "details": {},
                }
            },
            401,
        )
        response.headers["WWW-Authenticate"] = "Bearer"
        return response

    def _error_response(self, exc: Exception, request: web.Request) -> web.Response:
        if isinstance(exc, web.HTTPException):
            status = exc.status
            payload = {"error": {"type": type(exc).__name__, "message": exc.reason, "details": {}}}
        else:
            status = status_for_exception(exc)
            payload = error_payload(exc, status)
        if status >= 500:
            key = (
                type(exc).__name__,
                request.match_info.route.resource.canonical
                if request.match_info.route.resource
                else request.path,
            )
            log_limited(
                logger,
                logging.ERROR,
                key,
                "%s %s failed",
                request.method,
                request.path,
                exc_info=exc,
                limiter=self._error_log,
            )
        if getattr(exc, "close_connection", False):
            response = json_response(payload, status)
            response.force_close()  # answer with Connection: close, so the next request opens a new one
            return response
        elif logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s %s -> %d: %s", request.method, request.path, status, exc)
        return json_response(payload, status)

    async def _fallback(self, request: web.Request) -> web.StreamResponse:
        """Unknown paths (JSON 404), wrong methods (JSON 405) and CORS preflights."""
        path = request.path
        allowed = sorted({method for pattern, method in self._patterns if pattern.match(path)})
        if request.method == "OPTIONS" and self._cors_origins is not None:
            return self._preflight(request, allowed)
        if allowed:
            response = json_response(
                {
                    "error": {
                        "type": "MethodNotAllowed",
                        "message": f"{request.method} is not allowed on {path}; use {', '.join(allowed)}.",
                        "details": {"allowed": allowed},
                    }
                },
                405,
            )
            response.headers["Allow"] = ", ".join(allowed)
            return response
        return json_response(
            {
                "error": {
                    "type": "RouteNotFound",
                    "message": f"No route {path}. The API lives under /v1/agl (see /v1/agl/openapi.json).",
                    "details": {},
                }
            },
            404,
        )

    # ------------------------------------------------------------------------------ CORS

    def _origin_allowed(self, origin: str) -> bool:
        return self._cors_all or (self._cors_origins is not None and origin.rstrip("/") in self._cors_origins)

    def _preflight(self, request: web.Request, allowed: list[str]) -> web.Response:
        response = web.Response(status=200)  # as Agent Lightning 0.3 (Starlette's CORS) answered
        origin = request.headers.get("Origin", "")
        if origin and self._origin_allowed(origin) and allowed:
            response.headers["Access-Control-Allow-Methods"] = ", ".join([*allowed, "OPTIONS"])
            requested = request.headers.get("Access-Control-Request-Headers")
            if requested:
                response.headers["Access-Control-Allow-Headers"] = requested
            response.headers["Access-Control-Max-Age"] = "600"
        return response

    async def _add_cors_headers(self, request: web.Request, response: web.StreamResponse) -> None:
        origin = request.headers.get("Origin")
        if origin and self._cors_all:  # any origin: never together with credentials
            response.headers["Access-Control-Allow-Origin"] = "*"
            response.headers["Access-Control-Expose-Headers"] = "*"
        elif origin and self._origin_allowed(origin):
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Allow-Credentials"] = "true"
            response.headers["Access-Control-Expose-Headers"] = "*"
            response.headers.add("Vary", "Origin")

    # ------------------------------------------------------------------------------ lifecycle

    async def _on_shutdown(self, app: web.Application) -> None:
        self.api.stopping.set()  # long polls answer now

    async def start(self) -> None:
        """Bind and start serving; returns once the socket listens (`endpoint` is then final)."""
        if self._runner is not None:
            raise RuntimeError("LightningStoreServer is already running; call stop() first.")
        access_log = logging.getLogger("agl_core.store.http.access")
        runner = web.AppRunner(
            self.app,
            handle_signals=False,
            access_log=access_log if access_log.isEnabledFor(logging.DEBUG) else None,
            shutdown_timeout=self.shutdown_timeout,
            auto_decompress=False,  # bodies are inflated by the handlers: every encoding error is JSON
        )
        await runner.setup()
        if runner.server is not None:
            self.connections.attach(runner.server)
        site = web.TCPSite(runner, self.host, self._requested_port, reuse_address=True, backlog=ACCEPT_BURST)
        try:
            await site.start()
        except OSError as exc:
            await self.connections.stop()
            await runner.cleanup()
            raise OSError(
                exc.errno,
                f"Cannot listen on {self.host}:{self._requested_port}: {exc.strerror}. Is another server "
                "running there? Pick another --port (or 0 for a free one).",
            ) from exc
        self._runner = runner
        self.connections.listen(getattr(getattr(site, "_server", None), "sockets", None))
        self._stopped.clear()
        self.api.stopping.clear()
        addresses = runner.addresses
        if addresses:
            self._bound_port = int(addresses[0][1])
        logger.info("LightningStore API listening on %s", self.endpoint)

    async def stop(self) -> None:
        """Stop accepting, let in-flight requests finish (up to ``shutdown_timeout``), close connections.

        Long polls answer at once with what has finished. The store stays open. Idempotent.
        """
        runner, self._runner = self._runner, None
        if runner is None:
            return
        await self.connections.stop()
        await runner.cleanup()
        self._stopped.set()
        logger.info("LightningStore API on %s stopped", self.endpoint)

    async def run_forever(self) -> None:
        """Start (if needed) and serve until `stop()` is called or the task is cancelled."""
        if self._runner is None:
            await self.start()
        try:
            await self._stopped.wait()
        finally:
            await self.stop()


def _refusal_response(refusal: Refusal, request: web.Request) -> web.Response:
    value = refusal.value
    if refusal.rule == "host":
        kind = "MisdirectedRequest"
        message = (
            f"Host {value!r} is not this server's address; start `agl store serve` with --allowed-host "
            f"{value} to accept it."
        )
    elif refusal.rule == "origin":
        kind = "ForbiddenOrigin"
        message = f"Requests from the web origin {value!r} are refused; allow it with --cors-origin {value}."
    elif refusal.rule == "content_encoding":
        kind = "UnsupportedMediaTypeError"
        message = f"Content-Encoding {value!r} is not supported; send the body uncompressed or with gzip."
    else:
        kind = "UnsupportedMediaTypeError"
        message = (
            f"{request.method} {request.path} needs Content-Type: {' or '.join(refusal.allowed)}, "
            f"got {value or 'none'!r}."
        )
    return json_response({"error": {"type": kind, "message": message, "details": {}}}, refusal.status)


def _replay(cached: CachedResponse) -> web.Response:
    return web.Response(body=cached.body, status=cached.status, content_type="application/json")
