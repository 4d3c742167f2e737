"""Compatibility module for Agent Lightning 0.3's ``agentlightning.execution.inter_process``.

Listed in docs/migrating-from-agent-lightning.md.

0.3 shipped an empty placeholder here.
"""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__ = []

_NAMES: dict[str, Any] = {}

_REASON = (
    "it was an empty placeholder in 0.3; use ClientServerExecutionStrategy (strategy 'cs') for "
    "several processes"
)

_DROPPED: dict[str, str] = dict.fromkeys(["InterProcessExecutionStrategy"], _REASON)

__getattr__ = module_getattr("agl_core.execution.inter_process", _NAMES, _DROPPED)
