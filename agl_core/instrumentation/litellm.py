"""Compatibility module for Agent Lightning 0.3's ``agentlightning.instrumentation.litellm``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__ = []

_NAMES: dict[str, Any] = {}

_REASON = "agl's LLM proxy is not LiteLLM and records token ids itself (agl_core.llm_proxy)"

_DROPPED: dict[str, str] = dict.fromkeys(["instrument_litellm", "uninstrument_litellm"], _REASON)

__getattr__ = module_getattr("agl_core.instrumentation.litellm", _NAMES, _DROPPED)
