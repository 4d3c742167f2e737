"""Ctrl-C (SIGINT) in `fit`, both strategies: everything stops; no rollout or attempt is left `running`."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from agl_core.store.sqlite import SqliteLightningStore

REPO = Path(__file__).resolve().parents[2]
ACTIVE = ["preparing", "running"]


async def counts(db: Path) -> tuple[int, int]:
    """(rollouts running, rollouts succeeded) in the store file."""
    store = SqliteLightningStore(db)
    try:
        running = (await store.query_rollouts(status_in=ACTIVE, limit=1)).total
        succeeded = (await store.query_rollouts(status_in=["succeeded"], limit=1)).total
        return running, succeeded
    finally:
        await store.close()


def wait_for_two_in_flight(db: Path, proc: subprocess.Popen[str], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0]
        if db.exists():
            try:
                if asyncio.run(counts(db)) == (2, 2):
                    return
            except Exception:  # the schema may not be there yet
                pass
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"two rollouts were never in flight: {proc.communicate()[0]}")


@pytest.mark.parametrize(("strategy", "outcome"), [("cs", "FIT RETURNED"), ("shm", "FIT INTERRUPTED")])
def test_sigint_stops_fit_its_runners_and_reports_in_flight_attempts(
    strategy: str, outcome: str, tmp_path: Path
) -> None:
    db = tmp_path / "run.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.execution._fit_until_interrupted", strategy, str(db)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wait_for_two_in_flight(db, proc)
    children = psutil.Process(proc.pid).children(recursive=True)
    assert len(children) >= (2 if strategy == "cs" else 0)  # the two runner processes

    proc.send_signal(signal.SIGINT)
    try:
        output, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 0, output
    assert outcome in output
    psutil.wait_procs(children, timeout=10)
    assert not [c.pid for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]

    async def inspect() -> None:
        store = SqliteLightningStore(db)
        try:
            assert (await store.query_rollouts(status_in=ACTIVE)).total == 0
            rollouts = list(await store.query_rollouts())
            assert len(rollouts) == 10
            interrupted = [r for r in rollouts if r.status == "requeuing"]
            assert len(interrupted) == 2  # failed by the shutdown, requeued per RolloutConfig
            for rollout in rollouts:
                for attempt in await store.query_attempts(rollout.rollout_id):
                    assert attempt.status not in ACTIVE
            for rollout in interrupted:
                (attempt,) = await store.query_attempts(rollout.rollout_id)
                assert attempt.status == "failed"
                spans = await store.query_spans(rollout.rollout_id)
                assert any("runner stopped" in str(s.attributes.get("exception.message", "")) for s in spans)
        finally:
            await store.close()

    asyncio.run(inspect())
