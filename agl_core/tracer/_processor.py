"""`LightningSpanProcessor`: routes each finished span to the trace context it was started in."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import get_current_span

from agl_core.tracer._binding import TraceBinding, current_binding

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import Span as SdkSpan

__all__ = ["LightningSpanProcessor", "live_span"]

logger = logging.getLogger(__name__)

_OWNERS: dict[int, tuple[TraceBinding, SdkSpan]] = {}
"""Span id -> the trace binding it belongs to and the live span, for every span started in a trace context
and not ended."""


def live_span(span_id: int) -> SdkSpan | None:
    """The span with this id if it was started inside a trace context and has not ended, else None."""
    owner = _OWNERS.get(span_id)
    return owner[1] if owner is not None else None


class LightningSpanProcessor(SpanProcessor):
    """Attributes spans to trace contexts: decided when a span starts, applied when it ends.

    ``on_start`` looks up the trace binding current in the starting context (a ``contextvars`` variable);
    when there is none but the parent span belongs to a binding (OpenTelemetry context propagated to a
    thread by hand), the span joins its parent's. ``on_end`` hands the span to that binding, whatever
    thread or task ends it. Spans started outside every trace context are not recorded.

    All instances share one span-to-binding table, so a span made on one provider (the application's
    global one) joins a parent made on another (agl's own), whatever thread it starts in.
    """

    def __init__(self, disable_store_submission: bool = False) -> None:
        if disable_store_submission:  # Agent Lightning 0.3's argument: only its default is meaningful here
            raise ValueError(
                "LightningSpanProcessor(disable_store_submission=True) is not supported: agl writes spans to "
                "the store of the trace context; open the trace context without a store to keep them local."
            )
        self.disable_store_submission = False
        self._owners = _OWNERS

    def on_start(self, span: SdkSpan, parent_context: Context | None = None) -> None:
        """Remember which trace binding the span belongs to."""
        binding = current_binding()
        if binding is None:
            parent = get_current_span(parent_context).get_span_context()
            if parent.is_valid:
                owner = self._owners.get(parent.span_id)
                binding = owner[0] if owner is not None else None
            if binding is None:
                return
        context = span.get_span_context()
        if context is not None:
            self._owners[context.span_id] = (binding, span)

    def on_end(self, span: ReadableSpan) -> None:
        """Hand the finished span to its binding (sampled spans only)."""
        context = span.get_span_context()
        if context is None:
            return
        owner = self._owners.pop(context.span_id, None)
        if owner is not None and context.trace_flags.sampled:
            owner[0].on_span_end(span)

    def shutdown(self) -> None:
        """Nothing to release: open spans of other providers still end through the shared table."""
        if self._owners:
            logger.debug("agl tracer: %d span(s) not ended at a provider shutdown", len(self._owners))

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered here (bindings flush on ``trace_context`` exit)."""
        return True
