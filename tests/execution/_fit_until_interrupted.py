"""A `fit` that runs until interrupted: two runners are stuck in long rollouts (test_ctrl_c).

Usage: ``python -m tests.execution._fit_until_interrupted cs|shm STORE.db``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import agl_core as agl
from agl_core.types import EnqueueRolloutRequest, PromptTemplate, RolloutConfig

RETRY_ON_FAILURE = RolloutConfig(max_attempts=2, retry_condition=["failed"])


@agl.rollout
async def slow_agent(task: int) -> float:
    """The first two tasks finish at once; the others take an hour (they are in flight at Ctrl-C)."""
    if task >= 2:
        await asyncio.sleep(3600)
    return 1.0


class Forever(agl.Algorithm):
    """Publish resources, enqueue ten rollouts, then wait forever."""

    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        store = self.get_store()
        await store.add_resources({"prompt": PromptTemplate(template="x", engine="f-string")})
        await store.enqueue_many_rollouts(
            [EnqueueRolloutRequest(input=i, config=RETRY_ON_FAILURE) for i in range(10)]
        )
        await asyncio.Event().wait()


STRATEGIES = {
    "cs": {"type": "cs", "graceful_timeout": 4.0, "terminate_timeout": 4.0},
    "shm": {"type": "shm", "graceful_delay": 1.0},
}


def main(strategy: str, db_path: str) -> None:
    trainer = agl.Trainer(
        n_runners=2,
        strategy=STRATEGIES[strategy],
        port=0,
        store=f"sqlite:///{db_path}",
        algorithm=Forever(),
        runner={"type": "litagent", "poll_interval": 0.05, "heartbeat_interval": 0.5},
        progress=False,
    )
    try:
        trainer.fit(slow_agent)
    except KeyboardInterrupt:  # the shared-memory strategy re-raises it after stopping everything
        print("FIT INTERRUPTED", flush=True)
    else:  # the client-server strategy swallows it after the shutdown, as Agent Lightning 0.3 did
        print("FIT RETURNED", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
