"""Compatibility module for Agent Lightning 0.3's ``agentlightning.trainer.registry``.

Listed in docs/migrating-from-agent-lightning.md.

``ExecutionStrategyRegistry`` maps 0.3's strategy aliases to agl's classes; agl resolves strategies
through ``build_component``.
"""

from __future__ import annotations

ExecutionStrategyRegistry: dict[str, str] = {
    "shm": "agl_core.execution.shared_memory.SharedMemoryExecutionStrategy",
    "cs": "agl_core.execution.client_server.ClientServerExecutionStrategy",
}
"""Execution strategy alias -> dotted path of the class, as in 0.3."""

__all__ = ["ExecutionStrategyRegistry"]
