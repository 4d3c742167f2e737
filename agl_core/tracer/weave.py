"""Compatibility module for Agent Lightning 0.3's ``agentlightning.tracer.weave``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__ = []

_NAMES: dict[str, Any] = {}

_REASON = (
    "agl has no Weave tracer; OtelTracer (the default) records every OpenTelemetry span, so export "
    "Weave's OpenTelemetry spans or use the LLM proxy"
)

_DROPPED: dict[str, str] = dict.fromkeys(
    ["WeaveTracer", "WeaveSpanRecordingContext", "WeaveTracerManagedTraceServer"], _REASON
)

__getattr__ = module_getattr("agl_core.tracer.weave", _NAMES, _DROPPED)
