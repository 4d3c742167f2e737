"""The store host restarts on its file: runners reconnect, nothing acknowledged is lost or claimed twice."""

from __future__ import annotations

import time
from typing import Any

from agl_core.types import RolloutConfig
from tests.multihost.conftest import Cluster, report
from tests.multihost.scenario import RESOURCES, enqueue, finished, overlapping_attempts, poll

CONFIG = RolloutConfig(unresponsive_seconds=5.0, max_attempts=3, retry_condition=["unresponsive", "failed"])


def test_store_restart_loses_nothing_and_claims_nothing_twice(cluster: Cluster) -> None:
    cluster.start_store()
    cluster.call(lambda c: c.add_resources(RESOURCES))
    cluster.start_runner("r1", 1)
    cluster.start_runner("r2", 2)
    before = enqueue(cluster, CONFIG, [{"n": n, "steps": 3, "step_s": 0.1} for n in range(40)])

    async def some_done(client: Any) -> Any:
        done = await client.query_rollouts(rollout_id_in=before, status_in=["succeeded"])
        return [r.rollout_id for r in done] if len(done) >= 10 else None

    acknowledged_done = poll(cluster, some_done, 120, "10 rollouts to succeed")
    killed_at = time.time()
    cluster.kill_store()
    cluster.start_store()
    up_at = time.time()
    after = enqueue(cluster, CONFIG, [{"n": 100 + n, "steps": 3, "step_s": 0.1} for n in range(20)])
    poll(cluster, finished(before + after), 240, "every rollout to finish after the restart")

    rollouts = cluster.call(lambda c: c.query_rollouts())
    by_id = {r.rollout_id: r for r in rollouts}
    attempts = {rid: list(cluster.call(lambda c, rid=rid: c.query_attempts(rid))) for rid in by_id}
    assert set(before + after) <= set(by_id), "an acknowledged enqueue was lost"
    assert all(by_id[rid].status == "succeeded" for rid in acknowledged_done), (
        "an acknowledged result was lost"
    )
    assert {r.status for r in rollouts} == {"succeeded"}
    double_claims = sum(overlapping_attempts(a) for a in attempts.values())
    assert double_claims == 0
    first_after = {}
    for rollout in rollouts:
        if rollout.end_time and rollout.end_time > up_at:
            worker = rollout.attempt.worker_id
            first_after[worker] = min(first_after.get(worker, float("inf")), rollout.end_time)
    assert set(first_after) == {"Worker-1", "Worker-2"}, "a runner did not reconnect"
    report(
        "store_restart",
        {
            "completed": len(rollouts),
            "retried": sum(1 for a in attempts.values() if len(a) > 1),
            "lost": len(set(before + after) - set(by_id)),
            "duplicated": double_claims,
            "store_down_s": round(up_at - killed_at, 2),
            "time_to_recover_s": {w: round(t - killed_at, 2) for w, t in sorted(first_after.items())},
        },
    )
