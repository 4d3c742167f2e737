"""Connection bounds of the store server: slow clients cannot stall it, many clients cannot exhaust it.

`ConnectionTracker` knows what each connection is doing -- waiting for a request head, receiving a
body, or being answered -- and:

* closes a connection that has not sent a complete request head within ``header_timeout`` seconds
  (the first request and every later one on a kept-alive connection);
* bounds the body: `agl_core.store.http.body.read_body` answers 408 when the body has not arrived
  within ``body_timeout`` seconds (and the tracker closes the connection if a handler never reads it);
* caps the open connections at ``max_connections`` (by default a little under the open-file limit):
  a new connection beyond the cap closes the one that has waited longest for its request, so new
  clients are still answered while slow ones hold the cap; one log line per minute says so;
* answers request-parsing errors (an over-long URL or header line, a malformed head) with the JSON
  error shape, logged once per kind and minute (`agl_core.utils.http_guard.LogLimiter`).

`answer_request_errors_in_json` is that last point alone, with the server's own error body: the LLM
proxy uses it, so both servers answer an over-long URL or header with JSON rather than aiohttp's text.

aiohttp knows none of this by itself (depending on its version it waits for a first request head
forever and for a body as long as bytes trickle in), so the tracker attaches to the `web.Server` the
app runner builds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import resource
import socket
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong

from agl_core.utils.http_guard import LogLimiter, log_limited

__all__ = [
    "ACCEPT_BURST",
    "ACCEPT_QUEUE",
    "CONNECTIONS",
    "ConnectionTracker",
    "ErrorBody",
    "answer_request_errors_in_json",
    "default_max_connections",
    "store_error_body",
]

ErrorBody = Callable[[int, str, str], bytes]
"""``(status, error type, message) -> JSON body`` of a server's error answers."""

RequestErrorHook = Callable[[int, "BaseException | None", web.BaseRequest], None]
"""Called with each request aiohttp could not parse or answer (to log it)."""


def store_error_body(status: int, kind: str, message: str) -> bytes:
    """The store API's error body, ``{"error": {"type", "message", "details"}}``."""
    return json.dumps({"error": {"type": kind, "message": message, "details": {}}}).encode()


ACCEPT_BURST = 32
"""Connections asyncio accepts in one go (the site's backlog): fewer than the open-file reserve."""

ACCEPT_QUEUE = 1024
"""The kernel's queue of connections waiting to be accepted."""

_WAITING, _RECEIVING, _WORKING = 0, 1, 2
_FD_RESERVE = 64  # files the process keeps for itself (store, logs, outgoing sockets)
_BODY_GRACE = 5.0  # read_body answers 408 at body_timeout; the sweep closes what it did not see


def default_max_connections() -> int:
    """The open-file limit (``ulimit -n``) less a reserve of 64, at least 16, at most 10,000."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 10_000
    return max(16, min(10_000, soft - _FD_RESERVE))


class ConnectionTracker:
    """The connection bounds of one server (see the module docstring).

    Args:
        header_timeout: Seconds a connection gets to send a complete request head.
        body_timeout: Seconds a request gets for its whole body once its head has arrived.
        max_connections: Most open connections; None derives it from the open-file limit.
        logger: Where the cap's log line and request-parsing errors go.
    """

    def __init__(
        self,
        *,
        header_timeout: float,
        body_timeout: float,
        max_connections: int | None,
        logger: logging.Logger,
    ) -> None:
        if header_timeout <= 0 or body_timeout <= 0:
            raise ValueError(
                f"header_timeout and body_timeout must be > 0 s, got {header_timeout} and {body_timeout}."
            )
        if max_connections is not None and max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}.")
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.max_connections = max_connections if max_connections is not None else default_max_connections()
        self.closed_slow = 0
        """Connections closed for sending a request head or body too slowly."""
        self.closed_at_cap = 0
        """Connections closed to make room for a new one at the cap."""
        self._logger = logger
        self._errors = LogLimiter(burst=1)
        self._states: dict[Any, tuple[int, float]] = {}
        self._opened: dict[Any, float] = {}
        self._server: web.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous_handler: Any = None
        self._task: asyncio.Task[None] | None = None
        self._cap_logged = float("-inf")

    # ------------------------------------------------------------------------------ lifecycle

    def attach(self, server: web.Server) -> None:
        """Track the connections of `server` (built by the app runner, before its site starts)."""
        answer_request_errors_in_json(server, store_error_body, self.request_error)
        server.__class__ = _TrackedServer  # same state, plus the connection hooks below
        server.tracker = self  # type: ignore[attr-defined]
        inner = server.request_handler
        states, clock = self._states, time.monotonic

        async def tracked(request: web.BaseRequest) -> web.StreamResponse:
            protocol = request.protocol
            states[protocol] = (_RECEIVING if request.body_exists else _WORKING, clock())
            try:
                return await inner(request)
            finally:
                if protocol in states:
                    states[protocol] = (_WAITING, clock())

        server.request_handler = tracked
        self._server = server
        loop = asyncio.get_running_loop()
        self._loop, self._previous_handler = loop, loop.get_exception_handler()
        loop.set_exception_handler(self._loop_exception)
        self._task = loop.create_task(self._sweep_forever(server))

    def listen(self, sockets: Any) -> None:
        """Give `sockets` (the site's listening sockets) a long accept queue.

        The site is started with a short backlog, which is also how many connections asyncio accepts
        in one go: the cap then closes connections before the open-file limit is reached (accepting
        1024 at once would pass it). The kernel's queue is made long again here.
        """
        for listening in sockets or ():
            with contextlib.suppress(OSError, ValueError):
                sock = socket.socket(fileno=listening.fileno())  # a second handle on the same socket
                try:
                    sock.listen(ACCEPT_QUEUE)
                finally:
                    sock.detach()  # the site still owns the file descriptor

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """asyncio's report of a failed ``accept()`` (out of files) once a minute; others as before."""
        if context.get("message") == "socket.accept() out of system resource":
            log_limited(
                self._logger,
                logging.WARNING,
                ("accept", "EMFILE"),
                "Store server out of open files (ulimit -n %d) while accepting; new connections wait a "
                "second. Raise ulimit -n or lower --max-connections (now %d).",
                resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                self.max_connections,
                limiter=self._errors,
            )
            return
        if self._previous_handler is not None:
            self._previous_handler(loop, context)
        else:
            loop.default_exception_handler(context)

    async def stop(self) -> None:
        """Stop sweeping."""
        task, self._task = self._task, None
        if self._loop is not None and self._loop.get_exception_handler() == self._loop_exception:
            self._loop.set_exception_handler(self._previous_handler)
        self._loop = None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._states.clear()
        self._opened.clear()

    # ------------------------------------------------------------------------------ events

    def body_received(self, request: web.BaseRequest) -> None:
        """`request`'s body has been read: it is being answered now."""
        if request.protocol in self._states:
            self._states[request.protocol] = (_WORKING, time.monotonic())

    def opened(self, connection: Any, transport: Any) -> None:
        """A new connection: it waits for its first head; past the cap, the oldest idle ones are closed.

        Idle means waiting for a request head or receiving a body; connections being answered are never
        cut, and neither is the new one (its protocol has not started yet), so the cap may be passed by
        the connections busy at that moment, within the open-file reserve.
        """
        now = time.monotonic()
        self._states[connection] = (_WAITING, now)
        self._opened[connection] = now
        excess = len(self._states) - self.max_connections
        if excess <= 0:
            return
        opened = self._opened
        idle = sorted(
            (opened.get(c, now), id(c), c)
            for c, (state, _) in self._states.items()
            if c is not connection and state != _WORKING and not getattr(c, "_request_in_progress", False)
        )
        for _, _, victim in idle[:excess]:
            self._close(victim)
            self.closed_at_cap += 1
        if now - self._cap_logged >= 60.0:
            self._cap_logged = now
            self._logger.warning(
                "Store server at its cap of %d open connections (--max-connections; the open-file limit "
                "is %d): closing the connections that have waited longest for a request (%d so far). "
                "Raise ulimit -n or --max-connections if these are real clients.",
                self.max_connections,
                resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                self.closed_at_cap,
            )

    def lost(self, connection: Any) -> None:
        """A connection closed."""
        self._states.pop(connection, None)
        self._opened.pop(connection, None)

    def request_error(self, status: int, exc: BaseException | None, request: web.BaseRequest) -> None:
        """Log a request aiohttp could not parse or answer, once per kind per minute."""
        kind = type(exc).__name__ if exc is not None else f"HTTP {status}"
        if status >= 500:
            log_limited(
                self._logger,
                logging.ERROR,
                (kind, "request"),
                "Error handling a request from %s",
                request.remote,
                exc_info=exc,
                limiter=self._errors,
            )
        else:
            log_limited(
                self._logger,
                logging.WARNING,
                (kind, "request"),
                "Bad request from %s: %s",
                request.remote,
                _reason(exc),
                limiter=self._errors,
            )

    # ------------------------------------------------------------------------------ sweeping

    async def _sweep_forever(self, server: web.Server) -> None:
        interval = min(1.0, self.header_timeout / 4, self.body_timeout / 4)
        while True:
            await asyncio.sleep(interval)
            self.sweep(time.monotonic())

    def sweep(self, now: float) -> None:
        """Close connections past their head or body deadline."""
        header_deadline = now - self.header_timeout
        body_deadline = now - self.body_timeout - _BODY_GRACE
        for connection, (state, since) in list(self._states.items()):
            if (state == _WAITING and since < header_deadline) or (
                state == _RECEIVING and since < body_deadline
            ):
                if state == _WAITING and getattr(connection, "_request_in_progress", False):
                    continue  # still writing the previous answer to a slow reader
                self._close(connection)
                self.closed_slow += 1

    def _close(self, connection: Any) -> None:
        self._states.pop(connection, None)
        self._opened.pop(connection, None)
        connection.force_close()


def _reason(exc: BaseException | None) -> str:
    if isinstance(exc, LineTooLong):
        return (
            "a request line or header line is longer than 8190 bytes; keep the URL and each header line "
            "under 8190 bytes."
        )
    if isinstance(exc, HttpProcessingError):
        return str(exc.message)
    return str(exc) if exc is not None else "unknown"


class _JsonErrorRequestHandler(web.RequestHandler):
    """aiohttp's connection protocol, answering the errors it handles itself in the server's JSON shape."""

    error_body: ErrorBody
    on_error: RequestErrorHook | None

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """The JSON error answer (`error_body`); closes the connection."""
        if self.on_error is not None:
            self.on_error(status, exc, request)
        if request.writer.output_size > 0:
            raise ConnectionError(
                "Response is sent already, cannot send another response with the error message"
            )
        if status >= 500:
            kind, text = "InternalServerError", "The server failed to answer this request; see its log."
        else:
            kind = type(exc).__name__ if exc is not None else "BadRequest"
            text = f"The request could not be read: {_reason(exc)}"
        response = web.Response(
            status=status, body=self.error_body(status, kind, text), content_type="application/json"
        )
        response.force_close()
        return response


class _JsonErrorServer(web.Server):
    """A runner's `web.Server` whose connections answer parsing errors with `error_body`."""

    error_body: ErrorBody
    on_error: RequestErrorHook | None

    def __call__(self) -> web.RequestHandler:
        handler = _JsonErrorRequestHandler(self, loop=self._loop, **self._kwargs)
        handler.error_body, handler.on_error = self.error_body, self.on_error
        return handler


def answer_request_errors_in_json(
    server: web.Server, error_body: ErrorBody, on_error: RequestErrorHook | None = None
) -> None:
    """Make `server` (an app runner's, before its site starts) answer unreadable requests with JSON.

    aiohttp answers an over-long URL or header line (400) or a malformed head in plain text by
    itself; after this call the answer is ``error_body(status, type, message)`` and `on_error` hears of
    each such request.
    """
    if not isinstance(server, _JsonErrorServer):
        server.__class__ = _JsonErrorServer  # same state, plus the two fields below
    server.error_body = error_body  # type: ignore[attr-defined]
    server.on_error = on_error  # type: ignore[attr-defined]


class _TrackedServer(_JsonErrorServer):
    """The runner's `web.Server` once a `ConnectionTracker` is attached."""

    tracker: ConnectionTracker

    def connection_made(self, handler: web.RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        self.tracker.opened(handler, transport)

    def connection_lost(self, handler: web.RequestHandler, exc: BaseException | None = None) -> None:
        super().connection_lost(handler, exc)
        self.tracker.lost(handler)


CONNECTIONS = web.AppKey("agl_connections", ConnectionTracker)
"""The app's `ConnectionTracker` (`read_body` takes its ``body_timeout`` and reports finished bodies)."""
