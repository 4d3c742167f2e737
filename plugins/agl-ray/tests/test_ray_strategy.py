"""The ray strategy on a local Ray: many rollouts over four actors, spans and rewards intact."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from _agents import EnqueueAndWait, quick_agent

import agl_core as agl

pytestmark = pytest.mark.usefixtures("local_ray")


def ray_spec(**overrides: Any) -> dict[str, Any]:
    """A ``ray`` strategy dict for the local 2-CPU Ray (actors take a quarter CPU each)."""
    spec: dict[str, Any] = {
        "type": "ray",
        "n_runners": 4,
        "runner_resources": {"CPU": 0.25},
        "server_host": "127.0.0.1",
        "graceful_timeout": 5.0,
    }
    spec.update(overrides)
    return spec


async def summary(store: Any) -> tuple[list[Any], dict[str, list[Any]]]:
    rollouts = list(await store.query_rollouts())
    spans = {r.rollout_id: list(await store.query_spans(r.rollout_id)) for r in rollouts}
    return rollouts, spans


def test_four_actors_run_200_rollouts_with_spans_and_rewards() -> None:
    # every actor is claiming before the first task goes in: a quick agent on a loaded machine could
    # otherwise finish all 200 on three actors while the fourth is still starting
    trainer = agl.Trainer(strategy=ray_spec(), algorithm=EnqueueAndWait(workers=4), progress=False)
    tasks = [{"n": n} for n in range(200)]
    trainer.fit(quick_agent, tasks)

    rollouts, spans = asyncio.run(summary(trainer.store))
    assert len(rollouts) == 200
    assert Counter(r.status for r in rollouts) == {"succeeded": 200}
    assert sorted(r.input["n"] for r in rollouts) == list(range(200))
    for rollout in rollouts:
        assert agl.find_final_reward(spans[rollout.rollout_id]) == pytest.approx(rollout.input["n"] / 1000)
        names = [s.name for s in spans[rollout.rollout_id]]
        assert len(names) >= 2, names  # the custom message and the reward
    workers = Counter(r.attempt.worker_id for r in rollouts)
    assert set(workers) == {f"Worker-{n}" for n in range(4)}
    assert all(r.attempt.sequence_id == 1 for r in rollouts)  # nothing retried, nothing duplicated
