"""The request rules both HTTP servers apply (the store's and the LLM proxy's), and their log limiter.

A web page in the user's browser can send requests to ``127.0.0.1``; the rules keep it from using a
server (see docs/store-http.md, "Browser safety"):

* **Host** (`HostRule`): a DNS-rebinding page reaches ``127.0.0.1`` under its own name, so only the
  names a server knows are accepted (plus IP literals where the server says so: a rebinding attack
  always uses a name).
* **Origin**: a request from a browser page carries ``Origin``; one that is not allowed is refused.
* **Content-Type** / **Content-Encoding**: the bodies a page can send without a preflight (a form,
  ``text/plain``) are refused; only the encodings a server inflates are accepted.

`RequestGuard` answers a neutral `Refusal` (which rule, the status, the offending value), never an
HTTP answer: each server words it in its own error body. `LogLimiter` keeps a failure that repeats
once per request from writing one log line per request.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web

__all__ = ["LIMITER", "HostRule", "LogLimiter", "Refusal", "RequestGuard", "host_name", "log_limited"]

_ENCODINGS = frozenset({"", "identity", "gzip", "deflate", "x-gzip"})
_HOST_MEMO = 256  # Host header values a rule remembers the verdict of
_MAX_KEYS = 1024  # log-limiter keys kept before the table starts over


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: the rule it broke, the HTTP status to answer and the offending value."""

    rule: Literal["host", "origin", "content_encoding", "content_type"]
    status: int
    value: str
    """The Host name, the Origin, the encoding or the content type that was refused."""
    allowed: tuple[str, ...] = ()
    """For ``content_type``: the types the route accepts."""


def host_name(host_header: str) -> str:
    """The name in a ``Host`` header: ``"127.0.0.1:4747"`` -> ``"127.0.0.1"``, ``"[::1]:80"`` -> ``"::1"``."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    host = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return host.rstrip(".")


class HostRule:
    """Which ``Host`` headers a server accepts (the DNS-rebinding guard).

    Args:
        names: Host names accepted (lowercase); ``"*"`` among them accepts any.
        any_host: Accept any ``Host`` (a server bound to a public address, or one that needs a token).
        ip_literals: Also accept any IP address, and names under ``.localhost``.
        missing_ok: Accept a request without a ``Host`` header.
    """

    def __init__(
        self,
        names: Iterable[str],
        *,
        any_host: bool = False,
        ip_literals: bool = False,
        missing_ok: bool = False,
    ) -> None:
        self.names = frozenset(n.strip().lower().rstrip(".") for n in names if n.strip())
        self.any_host = any_host or "*" in self.names
        self.ip_literals = ip_literals
        self.missing_ok = missing_ok
        self._seen: dict[str, bool] = {}  # raw header value -> verdict (bounded)

    def allows(self, host_header: str | None) -> bool:
        """Whether a request with this ``Host`` header (None: without one) may go on."""
        if self.any_host:
            return True
        if host_header is None:
            return self.missing_ok
        known = self._seen.get(host_header)
        if known is not None:
            return known
        name = host_name(host_header)
        allowed = name in self.names
        if not allowed and self.ip_literals:
            allowed = name.endswith(".localhost") or _is_ip(name)
        if len(self._seen) < _HOST_MEMO:
            self._seen[host_header] = allowed
        return allowed


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class RequestGuard:
    """The Host, Origin, Content-Encoding and Content-Type rules of one server.

    Args:
        hosts: The Host rule.
        origin_allowed: Whether a browser ``Origin`` may call the server.
        host_status: Status of a Host refusal (the store answers 421, the proxy 403).
        same_origin_ok: Accept an ``Origin`` naming the server itself (its pages call it).
    """

    def __init__(
        self,
        hosts: HostRule,
        origin_allowed: Callable[[str], bool],
        *,
        host_status: int = 403,
        same_origin_ok: bool = False,
    ) -> None:
        self.hosts = hosts
        self.origin_allowed = origin_allowed
        self.host_status = host_status
        self.same_origin_ok = same_origin_ok

    def check(self, request: web.BaseRequest, *, any_origin: bool = False) -> Refusal | None:
        """The Host and Origin rules (`any_origin`: a route every page may call, such as ``/health``)."""
        headers = request.headers
        host = headers.get("Host")
        if not self.hosts.allows(host):
            return Refusal("host", self.host_status, host_name(host or ""))
        origin = headers.get("Origin")
        if (
            origin is not None
            and not any_origin
            and not (self.same_origin_ok and _same_origin(origin, host or ""))
            and not self.origin_allowed(origin)
        ):
            return Refusal("origin", 403, origin)
        return None

    @staticmethod
    def check_encoding(request: web.BaseRequest) -> Refusal | None:
        """Refuse a ``Content-Encoding`` other than gzip, deflate or identity (415)."""
        encoding = request.headers.get("Content-Encoding", "").strip().lower()
        return None if encoding in _ENCODINGS else Refusal("content_encoding", 415, encoding)

    @staticmethod
    def check_content_type(
        request: web.BaseRequest,
        allowed: frozenset[str],
        *,
        json_suffix: bool = False,
        only_with_body: bool = False,
    ) -> Refusal | None:
        """Refuse a body whose ``Content-Type`` is not in `allowed` (415).

        `json_suffix` also accepts ``application/*+json``; `only_with_body` lets a request without a
        body pass whatever its type (it carries nothing to forge).
        """
        ctype = request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        if ctype in allowed or (json_suffix and ctype.endswith("+json")):
            return None
        if only_with_body and not request.content_length and "Transfer-Encoding" not in request.headers:
            return None
        return Refusal("content_type", 415, ctype, tuple(sorted(allowed)))


def _same_origin(origin: str, host_header: str) -> bool:
    return origin.split("://", 1)[-1].rstrip("/").lower() == host_header.strip().lower()


class LogLimiter:
    """Lets ``burst`` records per key through in each ``interval`` seconds and counts the rest.

    Args:
        interval: Length of a window in seconds.
        burst: Records of one key let through per window.
        clock: Monotonic time source (tests pass their own).
    """

    def __init__(
        self, interval: float = 60.0, burst: int = 3, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if interval <= 0 or burst < 1:
            raise ValueError(f"interval must be > 0 and burst >= 1, got {interval} and {burst}")
        self.interval = interval
        self.burst = burst
        self._clock = clock
        self._state: dict[Hashable, list[float | int]] = {}  # key -> [window start, let through, suppressed]

    def allow(self, key: Hashable) -> int | None:
        """None when a record of ``key`` should be dropped; else how many were dropped since the last one."""
        now = self._clock()
        state = self._state.get(key)
        if state is None or now - state[0] >= self.interval:
            suppressed = int(state[2]) if state is not None else 0
            if state is None and len(self._state) >= _MAX_KEYS:
                self._state.clear()
            self._state[key] = [now, 1, 0]
            return suppressed
        if state[1] < self.burst:
            state[1] += 1
            suppressed, state[2] = int(state[2]), 0
            return suppressed
        state[2] += 1
        return None


LIMITER = LogLimiter()
"""The limiter `log_limited` uses unless given another (the LLM proxy's)."""


def log_limited(
    logger: logging.Logger,
    level: int,
    key: Hashable,
    message: str,
    *args: Any,
    exc_info: BaseException | bool | None = None,
    limiter: LogLimiter | None = None,
) -> None:
    """Log through `limiter` (default `LIMITER`): dropped when ``key`` is over its budget, else with the
    count of records dropped since the last one."""
    suppressed = (limiter or LIMITER).allow(key)
    if suppressed is None:
        return
    if suppressed:
        message += " (%d similar message(s) suppressed)"
        args = (*args, suppressed)
    logger.log(level, message, *args, exc_info=exc_info)
