"""Detect (and, for exporters agl does not own, repair) AgentOps' broken OTLP exporter.

agentops 0.4.21's ``AuthenticatedOTLPExporter.export`` reads ``self._headers`` and ``self._session``,
private attributes of OpenTelemetry's ``OTLPSpanExporter`` that ``opentelemetry-exporter-otlp-proto-http``
1.45 removed. The ``AttributeError`` is swallowed by a broad ``except`` and logged below AgentOps' default
log level: every span is dropped silently. :func:`probe_agentops_exporter` checks exactly what ``export``
touches before sending, without any network traffic.

agl's own export path never uses that class (see :mod:`agl_agentops.exporter`). When the application
initialized AgentOps itself (``agentops_managed=False``), its exporter is AgentOps'; then
:func:`repair_agentops_exporter` replaces the class's ``export`` with one that sends through agl's
working exporter, using the same endpoint and AgentOps' own token.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from agl_agentops.exporter import AgentOpsAuthError, AgentOpsSpanExporter

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExportResult

__all__ = ["ExporterProbe", "probe_agentops_exporter", "repair_agentops_exporter"]

logger = logging.getLogger("agl_core.tracer.agentops.compat")

_PROBE_ENDPOINT = "http://127.0.0.1:9/v1/traces"  # never contacted: the probe sends nothing
_PROBE_TOKEN = "agl-probe-token"
_REPAIR_TIMEOUT_S = 10.0
_repair_lock = threading.Lock()


def _version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "not installed"


class ExporterProbe(BaseModel):
    """Whether AgentOps' own exporter can send with the installed OpenTelemetry exporter."""

    compatible: bool
    """``AuthenticatedOTLPExporter.export`` finds everything it reads (or agl repaired it)."""
    repaired: bool = False
    """agl replaced the class's ``export`` (see :func:`repair_agentops_exporter`)."""
    agentops_version: str
    otlp_http_version: str
    detail: str

    def message(self) -> str:
        """One line for logs and errors."""
        return (
            f"agentops {self.agentops_version} with opentelemetry-exporter-otlp-proto-http "
            f"{self.otlp_http_version}: {self.detail}"
        )


def probe_agentops_exporter() -> ExporterProbe:
    """Build an ``AuthenticatedOTLPExporter`` and run the header preparation its ``export`` does first.

    No request is made. Incompatible means every span AgentOps' exporter sends would be dropped.
    """
    from agentops.sdk.exporters import AuthenticatedOTLPExporter

    versions = {
        "agentops_version": _version("agentops"),
        "otlp_http_version": _version("opentelemetry-exporter-otlp-proto-http"),
    }
    repaired = getattr(AuthenticatedOTLPExporter.export, "_agl_repaired", False)
    exporter = AuthenticatedOTLPExporter(endpoint=_PROBE_ENDPOINT, jwt_provider=lambda: _PROBE_TOKEN)
    try:
        headers = exporter._prepare_headers()
        session_headers = dict(exporter._session.headers)
    except AttributeError as exc:
        detail = (
            f"AgentOps' exporter reads a private attribute the OpenTelemetry exporter no longer has ({exc})"
        )
        if repaired:
            detail += "; its export() was replaced by agl's working exporter"
        return ExporterProbe(compatible=repaired, repaired=repaired, detail=detail, **versions)
    finally:
        exporter.shutdown()
    if headers.get("Authorization") != f"Bearer {_PROBE_TOKEN}" or not isinstance(session_headers, dict):
        return ExporterProbe(
            compatible=repaired,
            repaired=repaired,
            detail="AgentOps' exporter does not put its token in the request headers",
            **versions,
        )
    return ExporterProbe(compatible=True, repaired=repaired, detail="AgentOps' exporter works", **versions)


class _AgentOpsJwt:
    """Token source over an ``AuthenticatedOTLPExporter``'s own JWT provider (AgentOps' client auth)."""

    def __init__(self, exporter: Any) -> None:
        self._exporter = exporter

    def token(self) -> str:
        token = self._exporter._get_current_jwt()
        if not token:
            raise AgentOpsAuthError("AgentOps has not authenticated yet (no JWT); the batch is not sent")
        return str(token)

    def invalidate(self, token: str) -> None:
        """AgentOps' client owns this token; nothing to forget here."""


def _repaired_export(self: Any, spans: Sequence[ReadableSpan]) -> SpanExportResult:
    delegate = self.__dict__.get("_agl_delegate")
    if delegate is None:
        delegate = AgentOpsSpanExporter(
            endpoint=self._endpoint, auth=_AgentOpsJwt(self), timeout=_REPAIR_TIMEOUT_S
        )
        self.__dict__["_agl_delegate"] = delegate
    result: SpanExportResult = delegate.export(spans)
    return result


_repaired_export._agl_repaired = True  # type: ignore[attr-defined]


def repair_agentops_exporter() -> ExporterProbe:
    """Make ``AuthenticatedOTLPExporter`` send through agl's exporter when the probe says it is broken.

    Returns the probe after the repair. Raises ``RuntimeError`` (saying what to do) when the exporter is
    broken and cannot be repaired, so spans are never dropped silently.
    """
    from agentops.sdk.exporters import AuthenticatedOTLPExporter

    with _repair_lock:
        probe = probe_agentops_exporter()
        if probe.compatible:
            return probe
        sample = AuthenticatedOTLPExporter(endpoint=_PROBE_ENDPOINT, jwt_provider=lambda: _PROBE_TOKEN)
        try:
            endpoint = getattr(sample, "_endpoint", None)
            has_jwt = callable(getattr(sample, "_get_current_jwt", None))
        finally:
            sample.shutdown()
        if endpoint != _PROBE_ENDPOINT or not has_jwt:
            raise RuntimeError(
                f"AgentOps cannot export spans ({probe.message()}) and agl cannot repair this exporter "
                "version. Use AgentOpsTracer(agentops_managed=True) (agl then exports with its own "
                "exporter) or install an opentelemetry-exporter-otlp-proto-http release that agentops "
                "supports (< 1.45)."
            )
        AuthenticatedOTLPExporter.export = _repaired_export
        repaired = probe_agentops_exporter()
        logger.warning("AgentOps' exporter was broken (%s); agl replaced its export().", probe.message())
        return repaired
