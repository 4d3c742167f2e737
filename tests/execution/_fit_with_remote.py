"""A `fit` on a fixed port that waits for a remote runner to join, then runs 30 rollouts (test_remote_runner).

Usage: ``python -m tests.execution._fit_with_remote PORT REMOTE_WORKER_ID N_LOCAL_RUNNERS``; prints one JSON
line mapping each rollout id to the worker that ran it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import agl_core as agl
from agl_core.types import EnqueueRolloutRequest, PromptTemplate

N_ROLLOUTS = 30


@agl.rollout
async def sleepy_agent(task: int) -> float:
    """A rollout that takes a little while, so that every runner gets some."""
    await asyncio.sleep(0.05)
    return 1.0


class WaitForRemote(agl.Algorithm):
    """Wait until every expected worker has registered, then enqueue and drain the rollouts."""

    def __init__(self, workers: set[str]) -> None:
        self.workers = workers
        self.ran_by: dict[str, str | None] = {}

    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        store = self.get_store()
        await store.add_resources({"prompt": PromptTemplate(template="x", engine="f-string")})
        deadline = time.monotonic() + 90
        while not self.workers <= {w.worker_id for w in await store.query_workers()}:
            if time.monotonic() > deadline:
                raise TimeoutError(f"workers {self.workers} never registered")
            await asyncio.sleep(0.05)
        rollouts = await store.enqueue_many_rollouts(
            [EnqueueRolloutRequest(input=i) for i in range(N_ROLLOUTS)]
        )
        pending = [r.rollout_id for r in rollouts]
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(pending)} rollouts never finished")
            done = await store.wait_for_rollouts(rollout_ids=pending, timeout=0.5)
            pending = [rid for rid in pending if rid not in {r.rollout_id for r in done}]
        for rollout in await store.query_rollouts():
            attempt = await store.get_latest_attempt(rollout.rollout_id)
            self.ran_by[rollout.rollout_id] = None if attempt is None else attempt.worker_id
            assert rollout.status == "succeeded", rollout


def main(port: int, remote_id: int, n_local: int) -> None:
    workers = {f"Worker-{remote_id}"} | {f"Worker-{i}" for i in range(n_local)}
    algorithm = WaitForRemote(workers)
    trainer = agl.Trainer(
        n_runners=n_local,
        strategy={"type": "cs", "n_runners": n_local, "server_host": "127.0.0.1"},
        port=port,
        algorithm=algorithm,
        runner={"type": "litagent", "poll_interval": 0.05, "heartbeat_interval": 0.5},
        progress=False,
    )
    trainer.fit(sleepy_agent)
    print(json.dumps(algorithm.ran_by), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
