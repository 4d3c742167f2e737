"""Refusing cross-site requests: foreign ``Origin`` headers, unknown ``Host`` names and non-JSON bodies.

A web page in the user's browser can send "simple" cross-origin POSTs (``text/plain``, form-encoded, or
a body with no type) without a preflight, and a DNS-rebinding page can reach ``127.0.0.1`` under its own
host name. The proxy therefore accepts only JSON bodies on POST routes, refuses requests whose
``Origin`` is not explicitly allowed, and refuses ``Host`` names that are not this machine's (IP
literals are always fine: a rebinding attack always uses a name). Agents' SDKs send no ``Origin`` and a
``Host`` naming the address they were given, so they pass untouched.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Iterable

from aiohttp import web

from agl_core.llm_proxy.errors import ProxyHTTPError

__all__ = ["RequestGuard"]

_JSON_TYPES = ("application/json",)
_HOST_CACHE_LIMIT = 256
_PREFLIGHT_MAX_AGE = "600"


def _machine_names() -> set[str]:
    names = {"localhost"}
    for lookup in (socket.gethostname, socket.getfqdn):
        with contextlib.suppress(OSError):
            names.add(lookup().lower())
    return names


class RequestGuard:
    """Origin, Host and content-type checks of one proxy.

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
        hosts = {h.lower().rstrip(".") for h in hosts}
        self.any_host = "*" in hosts or not check_host
        self._hosts = hosts | _machine_names()
        self._origins = {o.rstrip("/") for o in origins}
        self.any_origin = "*" in self._origins
        self._seen_hosts: dict[str, bool] = {}

    @property
    def cors(self) -> bool:
        """Whether any browser origin is allowed (responses then carry CORS headers)."""
        return bool(self._origins)

    def _host_allowed(self, host: str) -> bool:
        known = self._seen_hosts.get(host)
        if known is not None:
            return known
        name = host
        if name.startswith("["):  # [v6]:port
            name = name[1 : name.find("]")] if "]" in name else name[1:]
        elif name.count(":") == 1:
            name = name.rsplit(":", 1)[0]
        name = name.lower().rstrip(".")
        try:
            ipaddress.ip_address(name)
            allowed = True
        except ValueError:
            allowed = name in self._hosts or name.endswith(".localhost")
        if len(self._seen_hosts) < _HOST_CACHE_LIMIT:
            self._seen_hosts[host] = allowed
        return allowed

    def origin_allowed(self, origin: str) -> bool:
        """Whether a browser page from ``origin`` may call the proxy."""
        return self.any_origin or origin.rstrip("/") in self._origins

    def check(self, request: web.Request) -> None:
        """Refuse a request with a foreign ``Origin`` or an unknown ``Host`` name.

        Raises:
            ProxyHTTPError: 403 naming the header and the setting that allows it.
        """
        origin = request.headers.get("Origin")
        if origin is not None and not self.origin_allowed(origin):
            raise ProxyHTTPError(
                403,
                f"Cross-origin request from {origin!r} refused: browsers' pages may not call the LLM proxy "
                "unless their origin is allowed (LLMProxy(allowed_origins=[...])).",
                code="origin_not_allowed",
            )
        host = request.headers.get("Host")
        if host is not None and not self.any_host and not self._host_allowed(host):
            raise ProxyHTTPError(
                403,
                f"Host {host!r} is not a name of this proxy (a DNS-rebinding guard): call it by IP address, "
                "localhost or this machine's name, or allow the name with LLMProxy(allowed_hosts=[...]).",
                code="host_not_allowed",
            )

    @staticmethod
    def check_json(request: web.Request) -> None:
        """Refuse a POST body that is not declared as JSON (what browsers send cross-site without asking).

        Raises:
            ProxyHTTPError: 415.
        """
        if request.content_type not in _JSON_TYPES and not request.content_type.endswith("+json"):
            raise ProxyHTTPError(
                415,
                f"The request body must be sent as 'Content-Type: application/json', not "
                f"{request.headers.get('Content-Type', 'no content type')!r}.",
                code="unsupported_media_type",
            )

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
