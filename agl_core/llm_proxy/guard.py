"""The LLM proxy's use of the shared request rules (`agl_core.utils.http_guard`), worded as OpenAI errors.

A browser page may not call the proxy unless its ``Origin`` is allowed; a DNS-rebinding page may not
reach it under a foreign ``Host`` name (IP literals, ``localhost``, ``*.localhost`` and this machine's
names are fine: a rebinding attack always uses a name); POST bodies must be JSON. Agents' SDKs send no
``Origin`` and a ``Host`` naming the address they were given, so they pass untouched. This module adds
the proxy's CORS answers.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterable

from aiohttp import web

from agl_core.llm_proxy.errors import ProxyHTTPError
from agl_core.utils.http_guard import HostRule, Refusal, RequestGuard

__all__ = ["ProxyGuard"]

_JSON_TYPES = frozenset({"application/json"})
_PREFLIGHT_MAX_AGE = "600"


def _machine_names() -> set[str]:
    names = {"localhost"}
    for lookup in (socket.gethostname, socket.getfqdn):
        with contextlib.suppress(OSError):
            names.add(lookup().lower())
    return names


class ProxyGuard:
    """Origin, Host and content-type checks of one proxy, and its CORS headers.

    Args:
        hosts: Host names (besides IP literals, ``localhost``, this machine's names and the listening
            host) that requests may carry in ``Host``; ``"*"`` accepts any.
        origins: Browser origins (``"https://app.example.com"``) allowed to call the proxy; ``"*"``
            allows any origin (answered ``Access-Control-Allow-Origin: *``, never with credentials).
        check_host: Whether to check ``Host`` at all. The proxy turns it off when it requires a token:
            a rebinding page cannot know the token, and agents may then use any name.
    """

    def __init__(
        self, hosts: Iterable[str] = (), origins: Iterable[str] = (), check_host: bool = True
    ) -> None:
        rule = HostRule(
            {*hosts, *_machine_names()}, any_host=not check_host, ip_literals=True, missing_ok=True
        )
        self._origins = {o.rstrip("/") for o in origins}
        self.any_origin = "*" in self._origins
        self._rules = RequestGuard(rule, self.origin_allowed)

    @property
    def cors(self) -> bool:
        """Whether any browser origin is allowed (responses then carry CORS headers)."""
        return bool(self._origins)

    def origin_allowed(self, origin: str) -> bool:
        """Whether a browser page from ``origin`` may call the proxy."""
        return self.any_origin or origin.rstrip("/") in self._origins

    def check(self, request: web.Request) -> None:
        """Refuse a request with a foreign ``Origin`` or an unknown ``Host`` name.

        Raises:
            ProxyHTTPError: 403 naming the header and the setting that allows it.
        """
        refusal = self._rules.check(request)
        if refusal is not None:
            raise _error(refusal, request)

    def check_json(self, request: web.Request) -> None:
        """Refuse a POST body that is not declared as JSON (what browsers send cross-site without asking).

        Raises:
            ProxyHTTPError: 415.
        """
        refusal = RequestGuard.check_content_type(request, _JSON_TYPES, json_suffix=True)
        if refusal is not None:
            raise _error(refusal, request)

    def add_cors_headers(self, request: web.Request, response: web.StreamResponse) -> None:
        """Add ``Access-Control-Allow-Origin`` for an allowed origin (never ``Allow-Credentials``)."""
        origin = request.headers.get("Origin")
        if origin is None or not self.origin_allowed(origin):
            return
        response.headers["Access-Control-Allow-Origin"] = "*" if self.any_origin else origin
        if not self.any_origin:
            response.headers["Vary"] = "Origin"

    def preflight(self, request: web.Request) -> web.Response:
        """Answer a CORS preflight: 204 with the allowed methods and headers for an allowed origin."""
        origin = request.headers.get("Origin")
        if origin is None or not self.origin_allowed(origin):
            return ProxyHTTPError(
                403, f"Cross-origin requests from {origin!r} are not allowed.", code="origin_not_allowed"
            ).response()
        response = web.Response(status=204)
        self.add_cors_headers(request, response)
        response.headers["Access-Control-Allow-Methods"] = "GET, POST"
        requested = request.headers.get("Access-Control-Request-Headers")
        if requested:
            response.headers["Access-Control-Allow-Headers"] = requested
        response.headers["Access-Control-Max-Age"] = _PREFLIGHT_MAX_AGE
        return response


def _error(refusal: Refusal, request: web.Request) -> ProxyHTTPError:
    if refusal.rule == "origin":
        return ProxyHTTPError(
            403,
            f"Cross-origin request from {refusal.value!r} refused: browsers' pages may not call the LLM "
            "proxy unless their origin is allowed (LLMProxy(allowed_origins=[...])).",
            code="origin_not_allowed",
        )
    if refusal.rule == "host":
        return ProxyHTTPError(
            403,
            f"Host {request.headers.get('Host')!r} is not a name of this proxy (a DNS-rebinding guard): "
            "call it by IP address, localhost or this machine's name, or allow the name with "
            "LLMProxy(allowed_hosts=[...]).",
            code="host_not_allowed",
        )
    return ProxyHTTPError(
        415,
        f"The request body must be sent as 'Content-Type: application/json', not "
        f"{request.headers.get('Content-Type', 'no content type')!r}.",
        code="unsupported_media_type",
    )
