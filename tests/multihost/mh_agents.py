"""The agent the runner hosts run (imported as ``mh_agents:steady_agent`` by ``agl runner``)."""

from __future__ import annotations

import asyncio
from typing import Any

import agl_core as agl
from agl_core.types import PromptTemplate


@agl.rollout
async def steady_agent(task: dict[str, Any], prompt_template: PromptTemplate) -> float:
    """Work ``task["steps"]`` steps of ``task["step_s"]`` seconds, one span per step (the heartbeat)."""
    for step in range(task.get("steps", 4)):
        agl.emit_message(f"task {task['n']} step {step}")
        await asyncio.sleep(task.get("step_s", 0.1))
    return 1.0
