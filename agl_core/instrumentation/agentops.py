"""Compatibility module for Agent Lightning 0.3's ``agentlightning.instrumentation.agentops``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__ = []

_NAMES: dict[str, Any] = {}

_REASON = "install agl-agentops and use its AgentOpsTracer, which instruments AgentOps itself"

_DROPPED: dict[str, str] = dict.fromkeys(["instrument_agentops", "uninstrument_agentops"], _REASON)

__getattr__ = module_getattr("agl_core.instrumentation.agentops", _NAMES, _DROPPED)
