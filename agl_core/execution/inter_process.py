"""Compatibility module for Agent Lightning 0.3's ``agentlightning.execution.inter_process``.

Listed in docs/migrating-from-agent-lightning.md. 0.3 shipped `InterProcessExecutionStrategy` as an empty
placeholder reserving the ``ipc`` alias; so does agl: executing it raises `NotImplementedError` naming the
strategy to use for several processes, ``"cs"`` (`ClientServerExecutionStrategy`).
"""

from __future__ import annotations

from typing import Any

from agl_core.execution.base import ExecutionStrategy

__all__ = ["InterProcessExecutionStrategy"]


class InterProcessExecutionStrategy(ExecutionStrategy):
    """Placeholder for inter-process execution (alias ``ipc``), as in 0.3: it does not run anything."""

    alias: str = "ipc"

    def execute(self, algorithm: Any, runner: Any, store: Any) -> None:
        """Raise `NotImplementedError`: use ``strategy="cs"`` (`ClientServerExecutionStrategy`)."""
        raise NotImplementedError(
            "InterProcessExecutionStrategy is a placeholder (as in Agent Lightning 0.3); use "
            "ClientServerExecutionStrategy (strategy='cs') to run the algorithm and runners in processes."
        )
