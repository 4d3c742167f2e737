"""Faults and live scaling of the ray strategy: a killed actor, an unreachable store, 2 -> 4 -> 1 actors."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import ray
from _agents import EnqueueAndWait, quick_agent, stalling_agent
from test_ray_strategy import ray_spec, summary

import agl_core as agl
from agl_ray.actor import StoreUnreachableError

pytestmark = pytest.mark.usefixtures("local_ray")


def wait_until(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def kill_actor_running_pid(strategy: Any, pid: int) -> int:
    """``ray.kill`` the runner actor whose process is ``pid``; returns its worker id."""
    for worker_id, handle in strategy.runner_actors().items():
        if ray.get(handle.info.remote(), timeout=30)["pid"] == pid:
            ray.kill(handle)
            return worker_id
    raise AssertionError(f"no runner actor has pid {pid}")


def test_killed_actor_mid_rollout_is_replaced_and_its_rollout_retried(tmp_path: Path) -> None:
    marker = tmp_path / "stalled.pid"
    trainer = agl.Trainer(
        strategy=ray_spec(n_runners=2, max_restarts=2), algorithm=EnqueueAndWait(), progress=False
    )
    tasks: list[dict[str, Any]] = [{"n": n} for n in range(30)]
    tasks.insert(5, {"n": 999, "stall": True, "marker": str(marker)})
    killed: list[int] = []

    def killer() -> None:
        wait_until(lambda: marker.exists() and marker.read_text(), 120, "the stalled rollout to start")
        killed.append(kill_actor_running_pid(trainer.strategy, int(marker.read_text())))

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    trainer.fit(stalling_agent, tasks)
    thread.join(30)

    assert len(killed) == 1
    rollouts, _ = asyncio.run(summary(trainer.store))
    assert Counter(r.status for r in rollouts) == {"succeeded": 31}
    stalled = next(r for r in rollouts if r.input["n"] == 999)
    attempts = list(asyncio.run(trainer.store.query_attempts(stalled.rollout_id)))
    assert [a.status for a in attempts] == ["failed", "succeeded"]
    assert attempts[0].worker_id == f"Worker-{killed[0]}"
    assert attempts[1].worker_id != attempts[0].worker_id
    assert all(r.attempt.sequence_id == 1 for r in rollouts if r is not stalled)
    run = trainer.strategy.last_run  # type: ignore[attr-defined]
    assert run["deaths"] == 1 and run["replaced"] == 1 and run["started"] == 3


def test_scaling_2_to_4_to_1_loses_and_duplicates_nothing() -> None:
    algorithm = EnqueueAndWait(phases={0: 2, 100: 4, 200: 1}, batch=50)
    trainer = agl.Trainer(strategy=ray_spec(n_runners=2), algorithm=algorithm, progress=False)
    trainer.fit(quick_agent, [{"n": n} for n in range(300)])

    rollouts, _ = asyncio.run(summary(trainer.store))
    assert Counter(r.status for r in rollouts) == {"succeeded": 300}
    assert sorted(r.input["n"] for r in rollouts) == list(range(300))
    assert all(r.attempt.sequence_id == 1 for r in rollouts)
    counts = trainer.strategy.last_run["live_counts"]  # type: ignore[attr-defined]
    assert 4 in counts and counts[-1] in (0, 1)
    assert counts.index(4) < len(counts) - 1 - counts[::-1].index(1)  # reached 4, later down to 1
    late = [r for r in rollouts if r.input["n"] >= 250]  # the last batch, after scaling to 1
    assert len({r.attempt.worker_id for r in late}) == 1


def test_actor_that_cannot_reach_the_store_fails_fast_with_a_clear_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    trainer = agl.Trainer(
        strategy=ray_spec(n_runners=1, store_uri=url, connect_timeout=2.0),
        algorithm=EnqueueAndWait(),
        progress=False,
    )
    with pytest.raises(StoreUnreachableError, match=f"cannot reach the store at {url}"):
        trainer.fit(quick_agent, [{"n": 1}])
