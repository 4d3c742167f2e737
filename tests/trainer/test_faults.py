"""Faults inside the loop: an agent that raises, an agent that hangs, a runner process killed with SIGKILL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil

from agl_core.semconv import AGL_EXCEPTION
from agl_core.store.memory import InMemoryLightningStore
from agl_core.trainer import Trainer
from agl_core.types import RolloutConfig
from tests.trainer._helpers import (
    DrainAlgorithm,
    KillVictimAlgorithm,
    flaky_agent,
    hanging_agent,
    run,
    victim_agent,
)

FAST_RUNNER = {"type": "litagent", "poll_interval": 0.05, "heartbeat_interval": 0.3}


async def attempts_by_input(store: InMemoryLightningStore) -> dict[str, list[Any]]:
    result = {}
    for rollout in await store.query_rollouts():
        result[rollout.input["id"]] = list(await store.query_attempts(rollout.rollout_id))
    return result


def shm_trainer(store: InMemoryLightningStore, algorithm: DrainAlgorithm) -> Trainer:
    return Trainer(
        n_runners=2, strategy="shm", store=store, runner=FAST_RUNNER, algorithm=algorithm, progress=False
    )


def test_an_agent_that_raises_fails_the_attempt_and_is_retried_per_rollout_config() -> None:
    store = InMemoryLightningStore(scan_debounce_seconds=0.1)
    tasks = [{"id": f"t{i}", "fail_first": i % 3 == 0} for i in range(9)]
    config = RolloutConfig(max_attempts=2, retry_condition=["failed"])

    shm_trainer(store, DrainAlgorithm(config)).fit(flaky_agent, tasks)

    attempts = run(attempts_by_input(store))
    statuses = {r.input["id"]: r.status for r in run(store.query_rollouts())}
    assert set(statuses.values()) == {"succeeded"}
    for task in tasks:
        history = [a.status for a in attempts[task["id"]]]
        assert history == (["failed", "succeeded"] if task["fail_first"] else ["succeeded"])
    failed = [a for task in tasks for a in attempts[task["id"]] if a.status == "failed"]
    for attempt in failed:
        spans = run(store.query_spans(attempt.rollout_id, attempt.attempt_id))
        (exception,) = [s for s in spans if s.name == AGL_EXCEPTION]
        assert "planned failure" in str(exception.attributes["exception.message"])


def test_without_failed_in_retry_condition_a_raising_agent_fails_the_rollout_once() -> None:
    store = InMemoryLightningStore(scan_debounce_seconds=0.1)
    tasks = [{"id": "t0", "fail_first": True}, {"id": "t1"}]

    shm_trainer(store, DrainAlgorithm(RolloutConfig(max_attempts=3))).fit(flaky_agent, tasks)

    statuses = {r.input["id"]: r.status for r in run(store.query_rollouts())}
    assert statuses == {"t0": "failed", "t1": "succeeded"}
    assert [a.status for a in run(attempts_by_input(store))["t0"]] == ["failed"]


def test_an_agent_that_hangs_times_out_and_the_rollout_is_requeued_and_succeeds() -> None:
    store = InMemoryLightningStore(scan_debounce_seconds=0.1)
    tasks = [{"id": f"t{i}", "hang_first": i < 2} for i in range(6)]
    config = RolloutConfig(timeout_seconds=0.5, max_attempts=2, retry_condition=["timeout"])

    shm_trainer(store, DrainAlgorithm(config)).fit(hanging_agent, tasks)

    attempts = run(attempts_by_input(store))
    assert {r.status for r in run(store.query_rollouts())} == {"succeeded"}
    for task in tasks:
        history = [a.status for a in attempts[task["id"]]]
        assert history == (["timeout", "succeeded"] if task["hang_first"] else ["succeeded"])


def test_a_runner_process_killed_with_sigkill_goes_unresponsive_and_another_runner_retries(
    tmp_path: Path,
) -> None:
    store = InMemoryLightningStore(scan_debounce_seconds=0.1)
    pid_file = tmp_path / "victim.pid"
    tasks = [{"id": "victim", "victim": True, "pid_file": str(pid_file)}] + [
        {"id": f"t{i}"} for i in range(20)
    ]
    config = RolloutConfig(unresponsive_seconds=1.5, max_attempts=2, retry_condition=["unresponsive"])
    algorithm = KillVictimAlgorithm(pid_file, config)
    trainer = Trainer(
        n_runners=2,
        strategy={"type": "cs", "allowed_exit_codes": [0, -15, -9], "graceful_timeout": 5.0},
        port=0,
        store=store,
        runner=FAST_RUNNER,
        algorithm=algorithm,
        progress=False,
    )

    trainer.fit(victim_agent, tasks)

    assert algorithm.killed_pid is not None and not psutil.pid_exists(algorithm.killed_pid)
    rollouts = run(store.query_rollouts())
    assert len(rollouts) == len(tasks)
    assert {r.status for r in rollouts} == {"succeeded"}
    victim = run(attempts_by_input(store))["victim"]
    assert [a.status for a in victim] == ["unresponsive", "succeeded"]
    assert victim[0].worker_id != victim[1].worker_id
