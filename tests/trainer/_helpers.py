"""Agents and algorithms shared by the trainer tests (module level, so forked runner processes have them)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import openai

import agl_core as agl
from agl_core.algorithm import Algorithm
from agl_core.store.base import LightningStore
from agl_core.types import LLM, AttemptedRollout, EnqueueRolloutRequest, Rollout, RolloutConfig

FINISHED = ("succeeded", "failed", "cancelled")


@agl.rollout
def qa_agent(task: dict[str, Any], llm: LLM) -> float:
    """One chat call through the real openai client; reward 1 when the (echo) model repeats the question."""
    client = openai.OpenAI(base_url=llm.endpoint, api_key="test", max_retries=0, timeout=30)
    response = client.chat.completions.create(
        model=llm.model, messages=[{"role": "user", "content": task["question"]}]
    )
    client.close()
    return 1.0 if response.choices[0].message.content == task["question"] else 0.0


@agl.rollout
async def flaky_agent(task: dict[str, Any], rollout: AttemptedRollout) -> float:
    """Raises on the first attempt of tasks marked ``fail_first``; succeeds otherwise."""
    if task.get("fail_first") and rollout.attempt.sequence_id == 1:
        raise RuntimeError(f"planned failure of {task['id']}")
    return 1.0


@agl.rollout
async def hanging_agent(task: dict[str, Any], rollout: AttemptedRollout) -> float:
    """Hangs (until cancelled) on the first attempt of tasks marked ``hang_first``."""
    if task.get("hang_first") and rollout.attempt.sequence_id == 1:
        await asyncio.Event().wait()
    return 1.0


@agl.rollout
def victim_agent(task: dict[str, Any], rollout: AttemptedRollout) -> float:
    """On the first attempt of the ``victim`` task, announce this process's pid and block until killed."""
    if task.get("victim") and rollout.attempt.sequence_id == 1:
        Path(task["pid_file"]).write_text(str(os.getpid()))
        time.sleep(120)  # the test kills this process long before
    return 1.0


class DrainAlgorithm(Algorithm):
    """Enqueue every task with ``config`` and wait (bounded) until all of them finished."""

    def __init__(self, config: RolloutConfig | None = None, deadline_s: float = 90.0) -> None:
        self.config = config
        self.deadline_s = deadline_s
        self.rollout_ids: list[str] = []

    async def run(
        self, train_dataset: Sequence[Any] | None = None, val_dataset: Sequence[Any] | None = None
    ) -> None:
        store = self.get_store()
        resources = self.get_initial_resources()
        if resources:
            await store.add_resources(resources)
        tasks = list(train_dataset or [])
        requests = [EnqueueRolloutRequest(input=task, mode="train", config=self.config) for task in tasks]
        self.rollout_ids = [r.rollout_id for r in await store.enqueue_many_rollouts(requests)]
        await self.on_enqueued(store)
        await wait_finished(store, self.rollout_ids, self.deadline_s)

    async def on_enqueued(self, store: LightningStore) -> None:
        """Hook for subclasses: runs once everything is queued."""


class KillVictimAlgorithm(DrainAlgorithm):
    """Like `DrainAlgorithm`, and SIGKILLs the runner process that writes ``pid_file``."""

    def __init__(self, pid_file: Path, config: RolloutConfig, deadline_s: float = 90.0) -> None:
        super().__init__(config, deadline_s)
        self.pid_file = pid_file
        self.killed_pid: int | None = None

    async def on_enqueued(self, store: LightningStore) -> None:
        import signal

        deadline = time.monotonic() + self.deadline_s
        while not self.pid_file.exists() or not self.pid_file.read_text():
            if time.monotonic() > deadline:
                raise AssertionError("the victim rollout never started")
            await asyncio.sleep(0.01)
        self.killed_pid = int(self.pid_file.read_text())
        os.kill(self.killed_pid, signal.SIGKILL)


async def wait_finished(
    store: LightningStore, rollout_ids: Sequence[str], deadline_s: float
) -> list[Rollout]:
    """Wait until every rollout finished; AssertionError after ``deadline_s`` seconds."""
    deadline = time.monotonic() + deadline_s
    pending = list(rollout_ids)
    while pending:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"{len(pending)} rollouts did not finish within {deadline_s} s")
        done = await store.wait_for_rollouts(rollout_ids=pending, timeout=min(0.5, remaining))
        finished = {r.rollout_id for r in done}
        pending = [rid for rid in pending if rid not in finished]
    return list(await store.query_rollouts(rollout_id_in=list(rollout_ids)))


def run(coro: Any) -> Any:
    """Run a coroutine from a sync test (``fit`` runs its own event loops, so these tests are sync)."""
    return asyncio.run(coro)
