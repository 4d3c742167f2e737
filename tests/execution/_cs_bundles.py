"""Bundles for the client-server tests (module level: forked runner processes run them)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

from agl_core.execution.events import ExecutionEvent
from agl_core.store.base import LightningStore
from agl_core.types import EnqueueRolloutRequest

N_ROLLOUTS = 8
main_process_runs: list[tuple[int, bool]] = []
"""(pid, on the main thread) of each rollout run by `recording_runner` in this process."""


async def wait_all_finished(store: LightningStore, rollout_ids: list[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    pending = list(rollout_ids)
    while pending:
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(pending)} rollouts did not finish")
        done = await store.wait_for_rollouts(rollout_ids=pending, timeout=0.2)
        pending = [rid for rid in pending if rid not in {r.rollout_id for r in done}]


async def enqueue_and_wait(store: LightningStore, event: ExecutionEvent) -> None:
    """Enqueue N_ROLLOUTS and wait until every one of them finished."""
    rollouts = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(N_ROLLOUTS)])
    await wait_all_finished(store, [r.rollout_id for r in rollouts])


async def enqueue_when_two_runners_joined(store: LightningStore, event: ExecutionEvent) -> None:
    """`enqueue_and_wait` once two runners have polled the queue, so both of them take part.

    (A fast runner could otherwise finish every rollout before the other one's process is up.)
    """
    deadline = time.monotonic() + 60.0
    while len(await store.query_workers()) < 2:
        if time.monotonic() > deadline:
            raise AssertionError("two runners did not poll the store within 60 s")
        await asyncio.sleep(0.01)
    await enqueue_and_wait(store, event)


async def wait_for_stop(store: LightningStore, event: ExecutionEvent) -> None:
    """An algorithm that only waits for the stop event."""
    while not event.is_set():
        await asyncio.sleep(0.01)


async def completing_runner(store: LightningStore, worker_id: int, event: ExecutionEvent) -> None:
    """Complete rollouts, recording the process and the store class in the attempt's metadata."""
    while not event.is_set():
        rollout = await store.dequeue_rollout(worker_id=f"w{worker_id}")
        if rollout is None:
            await asyncio.sleep(0.01)
            continue
        metadata = {"pid": os.getpid(), "store": type(store).__name__}
        await store.update_attempt(
            rollout.rollout_id, rollout.attempt.attempt_id, status="succeeded", metadata=metadata
        )


async def recording_runner(store: LightningStore, worker_id: int, event: ExecutionEvent) -> None:
    """`completing_runner` that also remembers, in this process, where it ran."""
    done = 0
    while done < N_ROLLOUTS and not event.is_set():
        rollout = await store.dequeue_rollout(worker_id=f"w{worker_id}")
        if rollout is None:
            await asyncio.sleep(0.01)
            continue
        main_process_runs.append((os.getpid(), threading.current_thread() is threading.main_thread()))
        await store.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, status="succeeded")
        done += 1


async def crashing_runner(store: LightningStore, worker_id: int, event: ExecutionEvent) -> None:
    raise RuntimeError(f"runner {worker_id} crashed on purpose")


async def self_killing_runner(store: LightningStore, worker_id: int, event: ExecutionEvent) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def stubborn_runner_for(pid_dir: Path):
    """A runner that ignores the stop event and SIGINT (its loop is blocked), so only SIGTERM stops it."""

    async def stubborn(store: LightningStore, worker_id: int, event: ExecutionEvent) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        (pid_dir / f"{worker_id}.pid").write_text(str(os.getpid()))
        time.sleep(120)  # blocks the loop: the event and cancellation cannot reach it

    return stubborn


def waiting_for_pid_files(pid_dir: Path, count: int):
    """An algorithm that returns once ``count`` runners wrote their pid file."""

    async def algorithm(store: LightningStore, event: ExecutionEvent) -> None:
        deadline = time.monotonic() + 60
        while len(list(pid_dir.glob("*.pid"))) < count:
            if time.monotonic() > deadline:
                raise AssertionError("the runners never started")
            await asyncio.sleep(0.01)

    return algorithm
