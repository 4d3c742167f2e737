"""Tracers: turn agent activity into spans attributed to a rollout attempt.

``Tracer`` is the contract, ``OtelTracer`` the OpenTelemetry implementation (registered as ``"otel"``),
``DummyTracer`` a backend-less one (``"dummy"``). The active tracer is context-local; see
:mod:`agl_core.tracer.base`. Spans other OpenTelemetry instrumentations make through the global provider
reach agl through :mod:`agl_core.tracer.bridge` (opt out: ``AGL_OTEL_GLOBAL_PROVIDER=0``). ``OtelTracer``
is imported lazily so that importing this package does not load the OpenTelemetry SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agl_core.tracer.base import Tracer, clear_active_tracer, get_active_tracer, set_active_tracer
from agl_core.tracer.dummy import DummySpanRecordingContext, DummyTracer

__all__ = [
    "ActiveTracerProvider",
    "DummySpanRecordingContext",
    "DummyTracer",
    "LightningSpanProcessor",
    "OtelSpanRecordingContext",
    "OtelTracer",
    "TraceExportReport",
    "Tracer",
    "clear_active_tracer",
    "get_active_tracer",
    "set_active_tracer",
]

_LAZY = {
    "ActiveTracerProvider": "agl_core.tracer.routing",
    "LightningSpanProcessor": "agl_core.tracer._processor",
    "OtelTracer": "agl_core.tracer.otel",
    "OtelSpanRecordingContext": "agl_core.tracer.otel",
    "TraceExportReport": "agl_core.tracer._binding",
}


def __getattr__(name: str) -> Any:
    if name in ("AgentOpsTracer", "WeaveTracer"):  # plugins' tracers, 0.3 names (agl_core._moved03)
        from agl_core._moved03 import moved_name

        return moved_name(__name__, name)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agl_core.tracer' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover
    from agl_core.tracer._binding import TraceExportReport
    from agl_core.tracer._processor import LightningSpanProcessor
    from agl_core.tracer.otel import OtelSpanRecordingContext, OtelTracer
    from agl_core.tracer.routing import ActiveTracerProvider
