"""``emit_exception``: record an exception as its own span."""

from __future__ import annotations

from typing import Any

from agl_core.emitter._resolve import extra_attributes, resolve_tracer
from agl_core.semconv import AGL_EXCEPTION
from agl_core.tracer.base import get_active_tracer
from agl_core.types import TraceStatus
from agl_core.utils.otel import format_exception_attributes

__all__ = ["emit_exception"]


def emit_exception(
    exception: BaseException, attributes: dict[str, Any] | None = None, propagate: bool = True
) -> None:
    """Emit an ``agentlightning.exception`` span with the OpenTelemetry ``exception.*`` attributes.

    The span's status is OK: it records that an exception happened, it did not fail itself. Raises
    ``TypeError`` when ``exception`` is not an exception instance.
    """
    if not isinstance(exception, BaseException):
        raise TypeError(
            f"emit_exception expects an exception instance, got {type(exception).__name__}; "
            "call it from an `except` block with the caught exception."
        )
    attrs = {**extra_attributes(attributes), **format_exception_attributes(exception)}
    tracer = resolve_tracer(propagate, "exception span", get_active_tracer)
    tracer.create_span(AGL_EXCEPTION, attributes=attrs, status=TraceStatus(status_code="OK"))
