"""``emit_message`` and its reader."""

from __future__ import annotations

from typing import Any

from agl_core.emitter._resolve import extra_attributes, resolve_tracer
from agl_core.semconv import AGL_MESSAGE, LightningSpanAttributes
from agl_core.tracer.base import get_active_tracer
from agl_core.types import SpanLike, TraceStatus

__all__ = ["emit_message", "get_message_value"]


def emit_message(message: str, attributes: dict[str, Any] | None = None, propagate: bool = True) -> None:
    """Emit an ``agentlightning.message`` span with ``message`` in ``agentlightning.message.body``.

    Raises ``TypeError`` when ``message`` is not a str.
    """
    if not isinstance(message, str):
        raise TypeError(
            f"Message must be a str, got {type(message).__name__}; format it with str() or f-strings."
        )
    attrs = {**extra_attributes(attributes), LightningSpanAttributes.MESSAGE_BODY.value: message}
    tracer = resolve_tracer(propagate, "message span", get_active_tracer)
    tracer.create_span(AGL_MESSAGE, attributes=attrs, status=TraceStatus(status_code="OK"))


def get_message_value(span: SpanLike) -> str | None:
    """The message body of a span written by :func:`emit_message`; None if it has none.

    Raises ``TypeError`` if the body attribute is not a str.
    """
    body = (span.attributes or {}).get(LightningSpanAttributes.MESSAGE_BODY.value)
    if body is None:
        return None
    if not isinstance(body, str):
        raise TypeError(
            f"{LightningSpanAttributes.MESSAGE_BODY.value} must be a str, got {type(body).__name__}."
        )
    return body
