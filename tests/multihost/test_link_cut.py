"""A runner host is cut off mid-rollout: takeover after the heartbeat timeout, late writes, resume."""

from __future__ import annotations

import time
from typing import Any

from agl_core.types import RolloutConfig
from tests.multihost.conftest import Cluster, report
from tests.multihost.scenario import RESOURCES, enqueue, finished, poll

UNRESPONSIVE_S = 3.0
CONFIG = RolloutConfig(unresponsive_seconds=UNRESPONSIVE_S, max_attempts=3, retry_condition=["unresponsive"])


def test_cut_runner_host_is_taken_over_and_its_late_writes_do_not_corrupt(cluster: Cluster) -> None:
    cluster.start_store()
    cluster.call(lambda c: c.add_resources(RESOURCES))
    cluster.start_runner("r1", 1)
    cluster.start_runner("r2", 2)
    # one long rollout (20 steps of 0.2 s): the cut lands inside it, and the other host is idle
    first = enqueue(cluster, CONFIG, [{"n": 0, "steps": 20, "step_s": 0.2}])

    async def running(client: Any) -> Any:
        rollouts = await client.query_rollouts(rollout_id_in=first, status_in=["running"])
        return rollouts[0] if rollouts else None

    victim = poll(cluster, running, 120, "the rollout to start")
    cut_host, other = ("r1", "r2") if victim.attempt.worker_id == "Worker-1" else ("r2", "r1")
    cut_worker, other_worker = f"Worker-{cut_host[1]}", f"Worker-{other[1]}"
    cut_at = time.time()
    cluster.topology.cut(cut_host)

    async def taken_over(client: Any) -> Any:
        latest = await client.get_latest_attempt(victim.rollout_id)
        return latest if latest.attempt_id != victim.attempt.attempt_id else None

    takeover = poll(cluster, taken_over, 120, "the other host to take the rollout over")
    poll(cluster, finished(first), 180, "the rollout to finish on the other host")
    spans_before = len(cluster.call(lambda c: c.query_spans(victim.rollout_id, victim.attempt.attempt_id)))
    cluster.topology.restore(cut_host)
    restored_at = time.time()

    second = enqueue(cluster, CONFIG, [{"n": 100 + n, "steps": 2, "step_s": 0.1} for n in range(30)])
    poll(cluster, finished(second), 180, "the second batch to finish")

    rollouts = cluster.call(lambda c: c.query_rollouts(rollout_id_in=first + second))
    by_id = {r.rollout_id: r for r in rollouts}
    attempts = cluster.call(lambda c: c.query_attempts(victim.rollout_id))
    latest_spans = cluster.call(lambda c: c.query_spans(victim.rollout_id, "latest"))
    late_spans = cluster.call(lambda c: c.query_spans(victim.rollout_id, victim.attempt.attempt_id))

    # every rollout finished once, successfully; nothing lost
    assert len(by_id) == 31
    assert {r.status for r in rollouts} == {"succeeded"}
    # the victim: taken over after the heartbeat timeout; its result is the other host's attempt
    victim_now = by_id[victim.rollout_id]
    assert takeover.worker_id == other_worker
    assert victim_now.attempt.attempt_id == takeover.attempt_id
    assert [a.worker_id for a in attempts] == [cut_worker, other_worker]
    assert {s.attempt_id for s in latest_spans} == {takeover.attempt_id}
    # late writes of the superseded attempt stay on that attempt: its spans, its own status only
    assert all(s.attempt_id == victim.attempt.attempt_id for s in late_spans)
    assert attempts[0].status in ("unresponsive", "succeeded", "failed")
    # the cut-off host resumed taking work once its link came back
    resumed = [r for r in rollouts if r.rollout_id in second and r.attempt.worker_id == cut_worker]
    assert resumed, "the cut-off host took no work after its link came back"
    report(
        "link_cut",
        {
            "completed": len(rollouts),
            "retried": sum(1 for r in rollouts if r.attempt.sequence_id > 1),
            "lost": 31 - sum(1 for r in rollouts if r.status == "succeeded"),
            "duplicated": sum(1 for r in rollouts if r.input in [o.input for o in rollouts if o is not r]),
            "takeover_s": round(takeover.start_time - cut_at, 2),
            "heartbeat_timeout_s": UNRESPONSIVE_S,
            "late_spans_of_superseded_attempt": len(late_spans) - spans_before,
            "superseded_attempt_final_status": attempts[0].status,
            "rollouts_by_cut_host_after_restore": len(resumed),
            "cut_host_back_to_work_s": round(min(r.end_time for r in resumed) - restored_at, 2),
        },
    )
