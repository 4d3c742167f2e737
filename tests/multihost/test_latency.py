"""Added latency (tc netem) on the store host's link: the loop keeps going; throughput at 0/50/200 ms."""

from __future__ import annotations

import time

import pytest

from agl_core.types import RolloutConfig
from tests.multihost.conftest import Cluster, report
from tests.multihost.netns import netem_unavailable
from tests.multihost.scenario import RESOURCES, enqueue, finished, poll

CONFIG = RolloutConfig(unresponsive_seconds=30.0, max_attempts=3, retry_condition=["unresponsive"])
ROLLOUTS = 20


def test_throughput_with_added_latency(cluster: Cluster) -> None:
    reason = netem_unavailable()
    if reason is not None:
        pytest.skip(f"latency scenario needs tc netem: {reason}")
    cluster.start_store()
    cluster.call(lambda c: c.add_resources(RESOURCES))
    cluster.start_runner("r1", 1)
    cluster.start_runner("r2", 2)
    figures = {}
    for delay_ms in (0, 50, 200):
        cluster.topology.delay("store", delay_ms)
        started = time.monotonic()
        ids = enqueue(cluster, CONFIG, [{"n": n, "steps": 1, "step_s": 0.05} for n in range(ROLLOUTS)])
        poll(cluster, finished(ids), 300, f"{ROLLOUTS} rollouts at {delay_ms} ms")
        wall = time.monotonic() - started
        rollouts = cluster.call(lambda c, ids=ids: c.query_rollouts(rollout_id_in=ids))
        assert {r.status for r in rollouts} == {"succeeded"}
        figures[f"{delay_ms}ms"] = {"rollouts_per_s": round(ROLLOUTS / wall, 2), "wall_s": round(wall, 2)}
    report("latency", {"rollouts": ROLLOUTS, "added_rtt": figures, "lost": 0, "duplicated": 0})
