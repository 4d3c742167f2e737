"""Compatibility module for Agent Lightning 0.3's ``agentlightning.instrumentation.vllm``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__ = []

_NAMES: dict[str, Any] = {}

_REASON = "agl's LLM proxy records prompt/response token ids from vLLM >= 0.10.2, which returns them natively"

_DROPPED: dict[str, str] = dict.fromkeys(["instrument_vllm", "uninstrument_vllm"], _REASON)

__getattr__ = module_getattr("agl_core.instrumentation.vllm", _NAMES, _DROPPED)
