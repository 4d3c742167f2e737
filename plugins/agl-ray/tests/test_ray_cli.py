"""``agl runner --strategy ray --address ...``: runner actors on a running Ray join a served store."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import ray
from _agents import RESOURCES

from agl_core.store.http.background import BackgroundServer
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import EnqueueRolloutRequest

HERE = Path(__file__).resolve().parent
AGL = Path(sys.executable).with_name("agl")

pytestmark = pytest.mark.usefixtures("local_ray")


def test_agl_runner_places_actors_on_ray_until_their_rollouts_are_done() -> None:
    store = InMemoryLightningStore()
    with BackgroundServer(store, host="127.0.0.1", port=0) as server:
        server.call(lambda: store.add_resources(RESOURCES))
        requests = [EnqueueRolloutRequest(input={"n": n}) for n in range(10)]
        server.call(lambda: store.enqueue_many_rollouts(requests))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
        address = ray.get_runtime_context().gcs_address
        command = [str(AGL), "runner", "--strategy", "ray", "--address", address]
        command += ["--store", server.endpoint, "--agent", "_agents:quick_agent", "--n-runners", "2"]
        command += ["--max-rollouts", "5", "--worker-id", "100", "--log-level", "WARNING"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)
        assert done.returncode == 0, done.stderr
        rollouts = list(server.call(lambda: store.query_rollouts()))
    assert Counter(r.status for r in rollouts) == {"succeeded": 10}
    assert Counter(r.attempt.worker_id for r in rollouts) == {"Worker-100": 5, "Worker-101": 5}


def test_address_needs_a_cluster_strategy() -> None:
    command = [str(AGL), "runner", "--store", "http://127.0.0.1:9", "--agent", "_agents:quick_agent"]
    command += ["--address", "auto"]
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 2
    assert "--address only applies to a cluster strategy" in done.stderr
