"""A tracer provider that follows the active agl tracer, for process-wide instrumentation.

Library instrumentations (OpenAI, ...) patch a class once per process and are bound to one provider.
Giving them this provider instead of one tracer's keeps them correct when several `OtelTracer` instances
trace side by side: each span is created by the provider of the tracer active in the calling context,
and is a non-recording span when no agl tracer is active (nothing is captured outside a trace).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry import trace as trace_api
from opentelemetry.trace import INVALID_SPAN, SpanKind, use_span

from agl_core.tracer.base import get_active_tracer

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Link, Span
    from opentelemetry.util.types import Attributes

__all__ = ["ActiveTracerProvider", "active_tracer_provider"]


class _ActiveTracer(trace_api.Tracer):
    """Delegates each span to the active agl tracer's provider (same instrumentation scope)."""

    def __init__(
        self, name: str, version: str | None, schema_url: str | None, attributes: Attributes
    ) -> None:
        self._scope = (name, version, schema_url, attributes)

    def _delegate(self) -> trace_api.Tracer | None:
        provider = getattr(get_active_tracer(), "tracer_provider", None)
        if provider is None:
            return None
        name, version, schema_url, attributes = self._scope
        tracer: trace_api.Tracer = provider.get_tracer(name, version, schema_url, attributes)
        return tracer

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        """Start the span on the active agl tracer's provider; a non-recording span when none is active."""
        delegate = self._delegate()
        if delegate is None:
            return INVALID_SPAN
        return delegate.start_span(
            name,
            context=context,
            kind=kind,
            attributes=attributes,
            links=links,
            start_time=start_time,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        )

    @contextmanager
    def start_as_current_span(  # type: ignore[override]
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[Span]:
        """Like ``start_span``, with the span current inside the block."""
        span = self.start_span(
            name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
        )
        with use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current


class ActiveTracerProvider(trace_api.TracerProvider):
    """``TracerProvider`` whose tracers create spans on the active agl tracer's own provider."""

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: Attributes = None,
        *args: Any,
        **kwargs: Any,
    ) -> trace_api.Tracer:
        """A tracer for this instrumentation scope that follows the active agl tracer."""
        return _ActiveTracer(instrumenting_module_name, instrumenting_library_version, schema_url, attributes)


active_tracer_provider = ActiveTracerProvider()
"""The process-wide instance handed to instrumentations."""
