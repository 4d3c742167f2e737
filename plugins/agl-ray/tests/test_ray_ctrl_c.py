"""Ctrl-C in the driver stops every runner actor and leaves nothing ``running`` in the store."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agl_core.store.sqlite import SqliteLightningStore

HERE = Path(__file__).resolve().parent


def runner_actor_pids() -> list[int]:
    """Processes whose title is a Ray runner actor of ours."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"RunnerActor" in cmdline:
            pids.append(int(entry.name))
    return pids


def test_ctrl_c_stops_every_actor_and_leaves_nothing_running(tmp_path: Path) -> None:
    store_db, markers = tmp_path / "store.db", tmp_path / "markers"
    markers.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(
        [sys.executable, str(HERE / "_fit_until_interrupted.py"), str(store_db), str(markers)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 180
        while len(list(markers.iterdir())) < 2:  # both actors are inside a rollout
            assert process.poll() is None, process.communicate()[0]
            assert time.monotonic() < deadline, "the actors never started their rollouts"
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=180)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, output
    assert "FIT RETURNED" in output

    async def active() -> tuple[list[str], list[str]]:
        store = SqliteLightningStore(str(store_db))
        try:
            rollouts = list(await store.query_rollouts())
            statuses = [r.status for r in rollouts]
            attempts = [a.status for r in rollouts for a in await store.query_attempts(r.rollout_id)]
            return statuses, attempts
        finally:
            await store.close()

    rollout_statuses, attempt_statuses = asyncio.run(active())
    assert len(rollout_statuses) == 6
    assert not {"running", "preparing"} & set(rollout_statuses), rollout_statuses
    assert not {"running", "preparing"} & set(attempt_statuses), attempt_statuses
    assert attempt_statuses.count("failed") >= 2  # the two in-flight attempts were reported
    deadline = time.monotonic() + 60
    while runner_actor_pids() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert runner_actor_pids() == []
