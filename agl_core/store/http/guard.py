"""Request guards of the store server: no cross-site writes, no DNS rebinding, no log floods.

A web page in the user's browser can send requests to ``127.0.0.1``; the guards make sure it
cannot change the store (see docs/store-http.md, "Browser safety"):

* **Host**: when the server is bound to a loopback address, the ``Host`` header must name a
  loopback host (DNS rebinding); other names are allowed with ``allowed_hosts``.
* **Origin**: a request carrying an ``Origin`` that is neither the server itself nor an allowed
  CORS origin is refused (403); the health checks answer any origin.
* **Content-Type**: mutating requests (POST, PUT, PATCH, DELETE) with a body must be
  ``application/json`` (or an OTLP type on the OTLP route): a form or ``text/plain`` body -- the kinds a
  page can send without a preflight -- gets 415. One without a body passes whatever its type (0.3
  clients send a bare dequeue); a page's request carries an ``Origin`` and meets the Origin rule.
* **Content-Encoding**: only ``gzip``, ``deflate`` and ``identity``; others get a JSON 415.

`ErrorLogLimiter` keeps repeated failures from flooding the log. Slow and many clients are bounded
by `agl_core.store.http.connections.ConnectionTracker`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp import web

__all__ = ["ErrorLogLimiter", "RequestGuard"]

_MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_JSON_TYPES = frozenset({"application/json"})
_OTLP_TYPES = frozenset({"application/json", "application/x-protobuf", "application/protobuf"})
_OTLP_PATH_SUFFIX = "/v1/traces"
_ENCODINGS = frozenset({"", "identity", "gzip", "deflate", "x-gzip"})
_ACCEPTED_HOST_HEADERS = 64  # raw Host header values a guard remembers as accepted

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, kind: str, message: str) -> web.Response:
    from agl_core.store.http.handlers import json_response

    return json_response({"error": {"type": kind, "message": message, "details": {}}}, status)


def _host_name(host_header: str) -> str:
    """``"127.0.0.1:4747"`` -> ``"127.0.0.1"``, ``"[::1]:80"`` -> ``"::1"``."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class RequestGuard:
    """Enforces the Host, Origin, Content-Type and Content-Encoding rules on each request.

    The server wraps every route's handler with it (`guarded`, or `screen` in its own wrapper) rather
    than installing an aiohttp middleware: a middleware chain costs every request two more coroutines.

    Args:
        bind_host: The address the server binds; Host is checked only for a loopback bind.
        origin_allowed: Whether an ``Origin`` is an allowed CORS origin.
        allowed_hosts: Extra Host names to accept (``"*"``: accept any Host).
    """

    def __init__(
        self,
        bind_host: str,
        origin_allowed: Callable[[str], bool],
        allowed_hosts: Iterable[str] | None = None,
    ) -> None:
        extra = {h.strip().lower() for h in allowed_hosts or () if h.strip()}
        self._any_host = "*" in extra or bind_host not in _LOOPBACK_HOSTS
        self._hosts = frozenset(_LOOPBACK_HOSTS | extra | {bind_host.lower()})
        self._origin_allowed = origin_allowed
        self._accepted_host_headers: set[str] = set()  # raw Host values that passed (bounded)

    def guarded(self, handler: Handler) -> Handler:
        """`handler` behind the guard: a refused request gets the refusal, others run `handler`."""
        screen = self.screen

        async def guarded_handler(request: web.Request) -> web.StreamResponse:
            refusal = screen(request)
            return refusal if refusal is not None else await handler(request)

        return guarded_handler

    def screen(self, request: web.Request) -> web.Response | None:
        """The refusal for `request`, or None when it may go on."""
        return self.check(request)

    def check(self, request: web.Request) -> web.Response | None:
        """The refusal for `request`, or None when it may go on.

        The usual request (an accepted ``Host`` header value seen before, no ``Origin``, no
        ``Content-Encoding``, ``Content-Type: application/json``) takes a short path of header lookups.
        """
        headers = request.headers
        host_header = headers.get("Host", "")
        if not self._any_host and host_header not in self._accepted_host_headers:
            host = _host_name(host_header)
            if host not in self._hosts:
                return _error(
                    421,
                    "MisdirectedRequest",
                    f"Host {host!r} is not this server's address; start `agl store serve` with "
                    f"--allowed-host {host} to accept it.",
                )
            if len(self._accepted_host_headers) < _ACCEPTED_HOST_HEADERS:
                self._accepted_host_headers.add(host_header)
        origin = headers.get("Origin")
        if (
            origin is None
            and headers.get("Content-Encoding") is None
            and (request.method not in _MUTATING or headers.get("Content-Type") == "application/json")
        ):
            return None
        return self._check_rest(request, origin)

    def _check_rest(self, request: web.Request, origin: str | None) -> web.Response | None:
        """`check` past the Host rule (the Origin, Content-Encoding and Content-Type rules)."""
        health = request.method == "OPTIONS" or (
            request.method in ("GET", "HEAD") and request.path.endswith("/health")
        )
        if (
            origin is not None
            and not health
            and not self._same_origin(origin, request)
            and not self._origin_allowed(origin)
        ):
            return _error(
                403,
                "ForbiddenOrigin",
                f"Requests from the web origin {origin!r} are refused; allow it with --cors-origin {origin}.",
            )
        encoding = request.headers.get("Content-Encoding", "").strip().lower()
        if encoding not in _ENCODINGS:
            return _error(
                415,
                "UnsupportedMediaTypeError",
                f"Content-Encoding {encoding!r} is not supported; send the body uncompressed or with gzip.",
            )
        if request.method in _MUTATING:
            ctype = request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
            allowed = _OTLP_TYPES if request.path.endswith(_OTLP_PATH_SUFFIX) else _JSON_TYPES
            # an empty body (a 0.3 client's bare dequeue) carries nothing to forge; the Origin rule holds
            has_body = bool(request.content_length) or "Transfer-Encoding" in request.headers
            if ctype not in allowed and has_body:
                return _error(
                    415,
                    "UnsupportedMediaTypeError",
                    f"{request.method} {request.path} needs Content-Type: {' or '.join(sorted(allowed))}, "
                    f"got {ctype or 'none'!r}.",
                )
        return None

    def _same_origin(self, origin: str, request: web.Request) -> bool:
        tail = origin.split("://", 1)[-1].rstrip("/").lower()
        return tail == request.headers.get("Host", "").strip().lower()


class ErrorLogLimiter:
    """Logs the traceback of a repeated server error once per `window` seconds, then counts repeats.

    42k identical failing requests write one traceback and a summary line per window, not 42k.
    """

    def __init__(self, logger: logging.Logger, window: float = 60.0) -> None:
        self._logger = logger
        self.window = window
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}

    def error(self, key: tuple[str, str], message: str, *args: Any, exc_info: BaseException | None) -> None:
        """Log `message` with its traceback, unless the same `key` was logged within the window."""
        self.log(logging.ERROR, key, message, *args, exc_info=exc_info)

    def log(
        self,
        level: int,
        key: tuple[str, str],
        message: str,
        *args: Any,
        exc_info: BaseException | None = None,
    ) -> None:
        """Log `message` at `level`, unless the same `key` was logged within the window (then count it)."""
        now = time.monotonic()
        last, suppressed = self._seen.get(key, (float("-inf"), 0))
        if now - last < self.window:
            self._seen[key] = (last, suppressed + 1)
            return
        if suppressed:
            self._logger.log(
                level, "%d more %s errors in the last %.0f s (not logged)", suppressed, key[0], now - last
            )
        if len(self._seen) > 1024:
            self._seen.clear()
        self._seen[key] = (now, 0)
        self._logger.log(level, message, *args, exc_info=exc_info)
