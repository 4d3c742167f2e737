"""Compatibility module for Agent Lightning 0.3's ``agentlightning.trainer.registry``.

Listed in docs/migrating-from-agent-lightning.md.

``ExecutionStrategyRegistry`` maps 0.3's strategy aliases to agl's classes; agl resolves strategies
through ``build_component``.
"""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

ExecutionStrategyRegistry: dict[str, str] = {
    "shm": "agl_core.execution.shared_memory.SharedMemoryExecutionStrategy",
    "cs": "agl_core.execution.client_server.ClientServerExecutionStrategy",
}
"""Execution strategy alias -> dotted path of the class, as in 0.3."""

__all__ = ["ExecutionStrategyRegistry"]

_NAMES: dict[str, Any] = {}

_DROPPED: dict[str, str] = {}

__getattr__ = module_getattr("agl_core.trainer.registry", _NAMES, _DROPPED)
