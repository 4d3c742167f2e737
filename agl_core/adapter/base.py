"""Adapter base classes: turn what a rollout recorded (spans) into training data."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from agl_core.types import Span, SpanLike, Triplet

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from agl_core.adapter.diagnostics import AdapterReport

__all__ = ["Adapter", "OtelTraceAdapter", "TraceAdapter", "TraceToTripletBase", "to_spans"]

T_from = TypeVar("T_from")
T_to = TypeVar("T_to")


def to_spans(source: Sequence[SpanLike]) -> list[Span]:
    """``source`` as :class:`Span` s (a ``ReadableSpan`` gets rollout/attempt ``"dummy"``, sequence 0)."""
    out: list[Span] = []
    for item in source:
        if isinstance(item, Span):
            out.append(item)
        elif hasattr(item, "get_span_context") and hasattr(item, "attributes"):
            out.append(Span.from_opentelemetry(item, "dummy", "dummy", 0))
        else:
            raise TypeError(
                f"Adapters take Span or OpenTelemetry ReadableSpan objects, got {type(item).__name__}; "
                "read spans with store.query_spans(rollout_id) or a tracer's get_last_trace()."
            )
    return out


class Adapter(Generic[T_from, T_to]):
    """Converts a ``T_from`` into a ``T_to``; calling the adapter is the same as :meth:`adapt`."""

    def __call__(self, source: T_from) -> T_to:
        return self.adapt(source)

    def adapt(self, source: T_from) -> T_to:
        """Convert ``source``; subclasses implement this."""
        raise NotImplementedError(f"{type(self).__name__} does not implement adapt()")


class TraceAdapter(Adapter[Sequence[Span], T_to], Generic[T_to]):
    """An adapter from one rollout's stored spans."""


class OtelTraceAdapter(Adapter[Sequence["ReadableSpan"], T_to], Generic[T_to]):
    """An adapter from OpenTelemetry ``ReadableSpan`` s."""


class TraceToTripletBase(TraceAdapter[list[Triplet]]):
    """A span → :class:`Triplet` adapter that can also explain its result (:meth:`diagnose`)."""

    def adapt_with_report(self, source: Sequence[SpanLike]) -> tuple[list[Triplet], AdapterReport]:
        """The triplets and a report of why spans were dropped or triplets are incomplete.

        The default checks the triplets :meth:`adapt` returns; built-in adapters override it with a
        report of every decision they made.
        """
        from agl_core.adapter.diagnostics import AdaptRecord, build_report

        spans = to_spans(source)
        triplets = self.adapt(spans)
        record = AdaptRecord(adapter=type(self).__name__, spans=spans, triplets=list(triplets))
        return triplets, build_report(record)

    def diagnose(self, source: Sequence[SpanLike]) -> AdapterReport:
        """Only the report of :meth:`adapt_with_report`."""
        return self.adapt_with_report(source)[1]
