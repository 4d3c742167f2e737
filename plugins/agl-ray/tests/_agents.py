"""Agents and an algorithm the Ray tests ship to runner actors (importable by name in the actors)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import agl_core as agl
from agl_core.types import EnqueueRolloutRequest, PromptTemplate, RolloutConfig

RETRY = RolloutConfig(max_attempts=3, retry_condition=["failed", "unresponsive", "timeout"])
RESOURCES = {"prompt_template": PromptTemplate(template="{x}", engine="f-string")}


@agl.rollout
async def quick_agent(task: dict[str, Any], prompt_template: PromptTemplate) -> float:
    """Emit one custom span, then return a reward of ``task["n"] / 1000``."""
    agl.emit_message(f"task {task['n']} on pid {os.getpid()}")
    await asyncio.sleep(task.get("sleep", 0.02))
    return task["n"] / 1000


@agl.rollout
async def stalling_agent(task: dict[str, Any], prompt_template: PromptTemplate) -> float:
    """The first attempt of a ``stall`` task writes its pid to ``task["marker"]`` and hangs; others return."""
    marker = Path(task["marker"]) if task.get("stall") else None
    if marker is not None:
        try:
            with marker.open("x") as handle:  # exactly one attempt wins the marker
                handle.write(str(os.getpid()))
        except FileExistsError:
            pass
        else:
            await asyncio.sleep(600)
    await asyncio.sleep(task.get("sleep", 0.02))
    return 1.0


class EnqueueAndWait(agl.Algorithm):
    """Enqueue every task (with retries allowed) and wait until each rollout is finished.

    ``phases`` maps a task index to a runner count: when that many rollouts are done the strategy is
    scaled (live scaling during ``fit``).
    """

    def __init__(self, phases: dict[int, int] | None = None, batch: int = 50, workers: int = 0) -> None:
        super().__init__()
        self.phases = dict(phases or {})
        self.batch = batch
        self.workers = workers

    async def _wait_for_workers(self, store: Any) -> None:
        """Return once ``self.workers`` runners have asked the store for work (each records its worker)."""
        deadline = asyncio.get_running_loop().time() + 120
        while len(await store.query_workers()) < self.workers:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"fewer than {self.workers} runners reached the store within 120 s")
            await asyncio.sleep(0.05)  # polling the store; the bound above ends it

    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        """Enqueue in batches; scale at the phase boundaries; return when every rollout finished."""
        store = self.get_store()
        await store.add_resources(RESOURCES)
        tasks = list(train_dataset or [])
        strategy = self.get_trainer().strategy
        await self._wait_for_workers(store)
        for start in range(0, len(tasks), self.batch):
            for boundary, count in sorted(self.phases.items()):
                if boundary == start:
                    strategy.scale(count)  # type: ignore[attr-defined]
            batch = tasks[start : start + self.batch]
            requests = [EnqueueRolloutRequest(input=t, config=RETRY) for t in batch]
            ids = [r.rollout_id for r in await store.enqueue_many_rollouts(requests)]
            pending = set(ids)
            while pending:
                done = await store.wait_for_rollouts(rollout_ids=list(pending), timeout=0.5)
                pending.difference_update(r.rollout_id for r in done)
