"""Compatibility module for Agent Lightning 0.3's ``agentlightning.instrumentation.weave``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__ = []

_NAMES: dict[str, Any] = {}

_REASON = "agl has no Weave integration; OtelTracer records OpenTelemetry spans"

_DROPPED: dict[str, str] = dict.fromkeys(
    ["instrument_weave", "uninstrument_weave", "InMemoryWeaveTraceServer"], _REASON
)

__getattr__ = module_getattr("agl_core.instrumentation.weave", _NAMES, _DROPPED)
