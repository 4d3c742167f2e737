"""Sending spans to AgentOps: authentication and an OTLP/HTTP exporter that works on today's OpenTelemetry.

AgentOps 0.4.21's ``AuthenticatedOTLPExporter`` subclasses OpenTelemetry's ``OTLPSpanExporter`` and reads
its private ``_headers``/``_session``, which ``opentelemetry-exporter-otlp-proto-http`` 1.45 removed: every
export then fails inside a broad ``except`` and AgentOps logs it at a level nobody sees. This module does
not subclass: :class:`AgentOpsSpanExporter` *composes* the public ``OTLPSpanExporter`` with a ``requests``
session whose ``auth`` adds the AgentOps bearer token to every request (public API of both libraries),
and counts what it delivered or lost in :class:`AgentOpsExportStats`.

Everything here runs on background threads (the batch processor's worker, the log uploader); every
request has a timeout.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Protocol

import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from pydantic import BaseModel

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "AgentOpsAuth",
    "AgentOpsAuthError",
    "AgentOpsExportStats",
    "AgentOpsSpanExporter",
    "TokenSource",
]

logger = logging.getLogger("agl_core.tracer.agentops.exporter")

AUTH_PATH = "/v3/auth/token"
"""Where AgentOps exchanges an API key for a JWT (``{"api_key"}`` -> ``{"token", "project_id"}``)."""
_AUTH_RETRY_AFTER_S = 5.0


def _user_agent() -> str:
    try:
        return f"agentops-python/{version('agentops')} agl-agentops/{version('agl-agentops')}"
    except PackageNotFoundError:  # pragma: no cover - both are installed with this plugin
        return "agl-agentops"


class AgentOpsAuthError(RuntimeError):
    """AgentOps did not issue a token (unreachable, rejected key, malformed answer)."""


class TokenSource(Protocol):
    """Where an exporter gets the AgentOps JWT."""

    def token(self) -> str:
        """The current token; raises :class:`AgentOpsAuthError` when there is none."""
        ...

    def invalidate(self, token: str) -> None:
        """The server rejected ``token``."""
        ...


class AgentOpsAuth:
    """Exchanges the API key for AgentOps' JWT once and caches it (thread-safe, bounded by ``timeout``).

    After a failure, :meth:`token` raises at once for a few seconds instead of asking again, so an
    unreachable endpoint costs one timeout per retry window, not one per batch.
    """

    def __init__(self, *, api_key: str, endpoint: str, timeout: float) -> None:
        self.api_key = api_key
        self.endpoint = endpoint.rstrip("/")
        self.timeout = timeout
        self.project_id: str | None = None
        self._token: str | None = None
        self._failed_at = 0.0
        self._last_error = ""
        self._lock = threading.Lock()

    def token(self) -> str:
        """The current JWT, fetched on first use (or after :meth:`invalidate`)."""
        with self._lock:
            if self._token is not None:
                return self._token
            if time.monotonic() - self._failed_at < _AUTH_RETRY_AFTER_S:
                raise AgentOpsAuthError(self._last_error)
            try:
                self._token, self.project_id = self._fetch()
            except AgentOpsAuthError as exc:
                self._failed_at, self._last_error = time.monotonic(), str(exc)
                raise
            return self._token

    def invalidate(self, token: str) -> None:
        """Forget ``token`` (the server rejected it); the next :meth:`token` authenticates again."""
        with self._lock:
            if self._token == token:
                self._token = None

    def _fetch(self) -> tuple[str, str | None]:
        url = self.endpoint + AUTH_PATH
        try:
            response = requests.post(
                url,
                json={"api_key": self.api_key},
                headers={"User-Agent": _user_agent()},
                timeout=self.timeout,
            )
        except requests.RequestException as exc:
            raise AgentOpsAuthError(f"AgentOps authentication at {url} failed: {exc!r}") from exc
        if response.status_code != 200:
            raise AgentOpsAuthError(
                f"AgentOps authentication at {url} answered HTTP {response.status_code}: "
                f"{response.text[:200]}"
            )
        try:
            body = response.json()
            token = body["token"]
        except (ValueError, KeyError, TypeError) as exc:
            raise AgentOpsAuthError(f"AgentOps authentication at {url} returned no token: {exc!r}") from exc
        if not isinstance(token, str) or not token:
            raise AgentOpsAuthError(f"AgentOps authentication at {url} returned an empty token")
        project = body.get("project_id")
        return token, project if isinstance(project, str) else None


class _BearerAuth(requests.auth.AuthBase):
    """``requests`` auth hook: the AgentOps JWT as ``Authorization: Bearer ...``."""

    def __init__(self, auth: TokenSource) -> None:
        self._auth = auth

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self._auth.token()}"
        return request


class AgentOpsExportStats(BaseModel):
    """What the AgentOps exporter of one tracer delivered (a snapshot)."""

    spans_exported: int = 0
    """Spans AgentOps acknowledged."""
    spans_failed: int = 0
    """Spans that could not be delivered (endpoint down, auth failure, HTTP error); logged when it starts."""
    batches_failed: int = 0
    last_error: str | None = None


class AgentOpsSpanExporter(SpanExporter):
    """OTLP/HTTP protobuf export to AgentOps with its bearer token, on the public OpenTelemetry API.

    Args:
        endpoint: Full OTLP traces URL (``.../v1/traces``).
        auth: Supplies the JWT; authentication happens on the exporting thread, never on the caller's.
        timeout: Seconds one export may take, retries included (OpenTelemetry retries transient errors
            with backoff until this deadline).
    """

    def __init__(self, *, endpoint: str, auth: TokenSource, timeout: float) -> None:
        self.endpoint = endpoint
        self._auth = auth
        session = requests.Session()
        session.auth = _BearerAuth(auth)
        session.hooks["response"].append(self._on_response)
        self._otlp = OTLPSpanExporter(endpoint=endpoint, timeout=timeout, session=session)
        self._stats = AgentOpsExportStats()
        self._lock = threading.Lock()
        self._failing = False

    def stats(self) -> AgentOpsExportStats:
        """Counters of delivered and lost spans."""
        with self._lock:
            return self._stats.model_copy()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Authenticate if needed, then send one batch; failures are counted and logged, never raised."""
        try:
            self._auth.token()
        except AgentOpsAuthError as exc:
            self._record(len(spans), str(exc))
            return SpanExportResult.FAILURE
        try:
            result = self._otlp.export(spans)
        except Exception as exc:  # the exporter should not raise; never let a bug kill the batch worker
            self._record(len(spans), f"unexpected export error: {exc!r}")
            return SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self._record(len(spans), None)
        else:
            self._record(len(spans), f"OTLP export to {self.endpoint} failed (see the opentelemetry log)")
        return result

    def shutdown(self) -> None:
        """Stop the underlying exporter (aborts its retries)."""
        self._otlp.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered here."""
        return True

    def _on_response(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        if response.status_code in (401, 403):
            header = response.request.headers.get("Authorization", "")
            if isinstance(header, bytes):
                header = header.decode("latin-1")
            self._auth.invalidate(header.removeprefix("Bearer "))

    def _record(self, count: int, error: str | None) -> None:
        with self._lock:
            stats = self._stats
            if error is None:
                stats.spans_exported += count
                recovered, self._failing = self._failing, False
                failed_so_far = stats.spans_failed
            else:
                stats.spans_failed += count
                stats.batches_failed += 1
                stats.last_error = error
                first, self._failing = not self._failing, True
        if error is None:
            if recovered:
                logger.warning(
                    "AgentOps export to %s works again (%d span(s) were lost so far).",
                    self.endpoint,
                    failed_so_far,
                )
        elif first:
            logger.warning(
                "AgentOps export failed; %d span(s) NOT delivered to AgentOps (they are in the agl store): "
                "%s",
                count,
                error,
            )
        else:
            logger.debug("AgentOps export still failing (%d more span(s)): %s", count, error)
