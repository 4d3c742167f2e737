"""`LightningStoreOTLPExporter`: an OTLP/HTTP span exporter that can send a rollout's spans to a store.

Needs ``opentelemetry-exporter-otlp-proto-http`` (not a dependency of agl-core). Agent Lightning 0.3's
tracers switched such an exporter to the store's ``/v1/traces`` for each attempt; agl's `OtelTracer`
writes spans to any store itself, so this class is for code that builds its own OpenTelemetry pipeline.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from agl_core.store.http.otlp import ATTEMPT_ID_KEY, ROLLOUT_ID_KEY

__all__ = ["LightningStoreOTLPExporter"]

logger = logging.getLogger(__name__)


def _tagged(span: ReadableSpan, ids: Resource) -> ReadableSpan:
    """A copy of ``span`` whose resource also names the rollout and attempt (the original is untouched)."""
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource.merge(ids),
        attributes=span.attributes,
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class LightningStoreOTLPExporter(OTLPSpanExporter):
    """An `OTLPSpanExporter` that, while enabled for an attempt, sends spans to a store's OTLP endpoint.

    `enable_store_otlp` points it at a store's ``/v1/traces`` (``store.otlp_traces_endpoint()``) for one
    rollout and attempt: each exported span then carries ``agentlightning.rollout_id`` and
    ``agentlightning.attempt_id`` in its resource, which is how the store files it. Otherwise the exporter
    drops spans when `should_bypass` is true (the default), or exports them to the endpoint it was built
    with. The constructor takes `OTLPSpanExporter`'s arguments; the store exporter reuses them (headers,
    timeout, compression, TLS files) with the store's endpoint.

    Differences from Agent Lightning 0.3: the spans handed to `export` are not modified (tagged copies are
    sent) and keep their ``service.name`` (0.3 overwrote it with ``unknown_service``), and the store
    endpoint gets its own HTTP client, because recent exporters no longer read the endpoint attribute 0.3
    rewrote.
    """

    def __init__(self, endpoint: str | None = None, *args: Any, **kwargs: Any) -> None:
        super().__init__(endpoint, *args, **kwargs)
        self._exporter_args: tuple[tuple[Any, ...], dict[str, Any]] = (args, kwargs)
        self._default_endpoint: str | None = self._endpoint
        self._store_endpoint: str | None = None
        self._store_exporters: dict[str, OTLPSpanExporter] = {}
        self._rollout_id: str | None = None
        self._attempt_id: str | None = None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(endpoint={self.endpoint!r}, rollout_id={self.rollout_id!r}, "
            f"attempt_id={self.attempt_id!r}, should_bypass={self.should_bypass()!r})"
        )

    @property
    def endpoint(self) -> str | None:
        """Where spans go now: the store's endpoint while enabled, else the endpoint it was built with."""
        return self._store_endpoint if self._store_endpoint is not None else self._default_endpoint

    @property
    def rollout_id(self) -> str | None:
        """The rollout the spans are filed under while enabled, else None."""
        return self._rollout_id

    @property
    def attempt_id(self) -> str | None:
        """The attempt the spans are filed under while enabled, else None."""
        return self._attempt_id

    def enable_store_otlp(self, endpoint: str, rollout_id: str, attempt_id: str) -> None:
        """Send the following spans to the store at ``endpoint`` (its ``/v1/traces``) for this attempt."""
        self._store_endpoint, self._rollout_id, self._attempt_id = endpoint, rollout_id, attempt_id

    def disable_store_otlp(self) -> None:
        """Stop sending spans to the store; back to bypassing (or the endpoint it was built with)."""
        self._store_endpoint = self._rollout_id = self._attempt_id = None

    def should_bypass(self) -> bool:
        """Whether spans are dropped while no attempt is enabled (True; override to export them)."""
        return True

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Export to the store for the enabled attempt; else drop (bypass) or export as built."""
        endpoint, rollout_id, attempt_id = self._store_endpoint, self._rollout_id, self._attempt_id
        if endpoint is not None and rollout_id is not None and attempt_id is not None:
            ids = Resource({ROLLOUT_ID_KEY: rollout_id, ATTEMPT_ID_KEY: attempt_id})  # no SDK defaults
            return self._store_exporter(endpoint).export([_tagged(span, ids) for span in spans])
        if self.should_bypass():
            logger.debug("No rollout and attempt enabled; dropping %d span(s).", len(spans))
            return SpanExportResult.SUCCESS
        return super().export(spans)

    def shutdown(self) -> None:
        """Shut this exporter and its store exporters down."""
        for exporter in self._store_exporters.values():
            exporter.shutdown()  # type: ignore[no-untyped-call]
        self._store_exporters.clear()
        super().shutdown()  # type: ignore[no-untyped-call]

    def _store_exporter(self, endpoint: str) -> OTLPSpanExporter:
        exporter = self._store_exporters.get(endpoint)
        if exporter is None:
            args, kwargs = self._exporter_args
            exporter = self._store_exporters[endpoint] = OTLPSpanExporter(endpoint, *args, **kwargs)
        return exporter
