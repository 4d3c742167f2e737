"""OpenTelemetry log records inside a rollout become span events, so message content sent as logs is kept.

Some frameworks write an LLM call's messages as OpenTelemetry **log records** (GenAI events) instead of span
attributes: Google ADK (``gen_ai.system.message`` / ``gen_ai.user.message`` / ``gen_ai.choice``, or one
``gen_ai.client.inference.operation.details`` record), and Semantic Kernel through Python ``logging`` when
an OpenTelemetry ``LoggingHandler`` is attached (its documented setup). :func:`bridge_global_logger_provider`
makes those records reach agl as it does for spans (:mod:`agl_core.tracer.bridge`): it installs an SDK
``LoggerProvider`` as the global one when the application has none, or adds agl's processor to the
application's own. :class:`LightningLogProcessor` adds each record whose span is a live span of a rollout
to that span as an event (name: the record's event name; attributes: the record's, non-scalar values as
JSON; ``body``: the body, JSON unless a string). The span is stored as usual, so the store contract is
unchanged and :mod:`agl_core.adapter.genai` reads the events like any other GenAI span events. Records
outside rollouts, or whose span has already ended, are ignored.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from agl_core.tracer._processor import live_span
from agl_core.tracer.bridge import global_provider_enabled, keep_enabled

__all__ = ["LightningLogProcessor", "bridge_global_logger_provider", "log_attributes"]

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_attached: dict[int, object] = {}

try:  # the OpenTelemetry logs SDK is still underscore-named (opentelemetry-sdk >= 1.43 has it)
    from opentelemetry import _logs as logs_api
    from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor
except ImportError:  # pragma: no cover - every supported SDK has it
    logs_api = None  # type: ignore[assignment]
    LoggerProvider = None  # type: ignore[assignment,misc]
    LogRecordProcessor = object  # type: ignore[assignment,misc]


def _scalar(value: Any) -> Any:
    """An attribute value OpenTelemetry accepts: scalars and scalar lists as they are, the rest as JSON."""
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Sequence) and all(isinstance(v, (str, bool, int, float)) for v in value):
        return list(value)
    return json.dumps(value, default=str)


def log_attributes(attributes: Mapping[str, Any] | None, body: Any) -> dict[str, Any]:
    """The span-event attributes of one log record (see the module docstring)."""
    out = {key: _scalar(value) for key, value in (attributes or {}).items() if value is not None}
    if body is not None:
        out["body"] = body if isinstance(body, str) else json.dumps(body, default=str)
    return out


class LightningLogProcessor(LogRecordProcessor):
    """Adds each log record emitted under a live rollout span to that span as an event."""

    def on_emit(self, log_record: Any) -> None:
        """Attach the record to its span (records of no live rollout span are ignored)."""
        record = getattr(log_record, "log_record", log_record)  # ReadWriteLogRecord or a bare LogRecord
        span_id = getattr(record, "span_id", None)
        span = live_span(span_id) if span_id else None
        if span is None or not span.is_recording():
            return
        attributes = dict(record.attributes or {})
        name = getattr(record, "event_name", None) or attributes.pop("event.name", None) or "log"
        timestamp = getattr(record, "timestamp", None) or getattr(record, "observed_timestamp", None)
        span.add_event(str(name), log_attributes(attributes, record.body), timestamp=timestamp)

    emit = on_emit  # the SDK before 1.39 called this method emit

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered."""
        return True


def bridge_global_logger_provider(enabled: bool | None = None) -> str:
    """Make log records of the global logger provider reach agl (idempotent). Returns what was done:
    ``installed``, ``attached``, ``unsupported`` or ``disabled`` (``enabled`` as in the span bridge)."""
    if logs_api is None or not global_provider_enabled(enabled):
        return "disabled"
    current = logs_api.get_logger_provider()
    if not hasattr(current, "add_log_record_processor"):  # the API's default proxy, or a no-op
        provider = LoggerProvider()
        keep_enabled(provider)
        logs_api.set_logger_provider(provider)
        current = logs_api.get_logger_provider()
        mode = "installed" if current is provider else "attached"
    else:
        mode = "attached"
    add = getattr(current, "add_log_record_processor", None)
    if not callable(add):
        logger.debug("The global logger provider (%s) takes no processors.", type(current).__name__)
        return "unsupported"
    with _lock:
        if id(current) in _attached:
            return mode
        _attached[id(current)] = current
    add(LightningLogProcessor())
    return mode
