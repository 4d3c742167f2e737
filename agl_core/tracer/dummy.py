"""`DummyTracer`: builds span records without any backend or store (emitters use it with propagate=False)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agl_core.tracer.base import Tracer
from agl_core.types import Attributes, SpanCoreFields, StatusCode, TraceStatus, convert_timestamp
from agl_core.utils.otel import format_exception_attributes

__all__ = ["DummySpanRecordingContext", "DummyTracer"]


class DummySpanRecordingContext:
    """Collects what ``operation_context`` records in memory; ``get_recorded_span`` works after it ends."""

    def __init__(
        self, name: str, attributes: dict[str, Any] | None = None, start_time: float | None = None
    ) -> None:
        # public, as in Agent Lightning 0.3 (its code and tests read them)
        self.name = name
        self.attributes: dict[str, Any] = dict(attributes or {})
        self.status = TraceStatus(status_code="UNSET")
        self.start_time = start_time if start_time is not None else time.time()
        self.end_time: float | None = None

    def record_exception(self, exception: BaseException) -> None:
        """Add the OpenTelemetry exception attributes of ``exception``."""
        self.attributes.update(format_exception_attributes(exception))

    def record_attributes(self, attributes: Attributes) -> None:
        """Merge ``attributes`` into the span's attributes."""
        self.attributes.update(attributes)

    def record_status(self, code: StatusCode, description: str | None = None) -> None:
        """Set the span's status."""
        self.status = TraceStatus(status_code=code, description=description)

    def finalize(self, end_time: float | None = None) -> None:
        """Mark the span ended (now, or at ``end_time``)."""
        self.end_time = end_time if end_time is not None else time.time()

    def get_recorded_span(self) -> SpanCoreFields:
        """The finished span; raises ``ValueError`` while the operation is still running."""
        if self.end_time is None:
            raise ValueError("The span is still recording; read it after the operation_context block ends.")
        return SpanCoreFields(
            name=self.name,
            attributes=dict(self.attributes),
            start_time=self.start_time,
            end_time=self.end_time,
            status=self.status,
        )


class DummyTracer(Tracer):
    """A tracer with no backend: ``create_span``/``operation_context`` return records, nothing is exported.

    It has no ``trace_context`` (``NotImplementedError``) and no traces (``get_last_trace()`` is empty).
    """

    def get_last_trace(self) -> list[Any]:
        """Always empty: a dummy tracer keeps no spans."""
        return []

    def create_span(
        self,
        name: str,
        attributes: dict[str, Any] | None = None,
        timestamp: float | None = None,
        status: TraceStatus | None = None,
    ) -> SpanCoreFields:
        """A zero-duration record at ``timestamp`` (seconds, or ns if > 1e12) or now; status OK by default."""
        at = convert_timestamp(timestamp) if timestamp is not None else time.time()
        return SpanCoreFields(
            name=name,
            attributes=dict(attributes or {}),
            start_time=at,
            end_time=at,
            status=status if status is not None else TraceStatus(status_code="OK"),
        )

    @contextmanager
    def operation_context(
        self,
        name: str,
        attributes: dict[str, Any] | None = None,
        start_time: float | None = None,
        end_time: float | None = None,
    ) -> Iterator[DummySpanRecordingContext]:
        """Record in memory; an exception sets status ERROR, adds exception attributes, and is re-raised."""
        converted = convert_timestamp(start_time) if start_time is not None else None
        started = converted if converted is not None else time.time()
        recording = DummySpanRecordingContext(name, attributes, started)
        try:
            yield recording
        except BaseException as exc:
            recording.record_exception(exc)
            recording.record_status("ERROR", str(exc))
            raise
        finally:
            recording.finalize(convert_timestamp(end_time) if end_time is not None else None)
