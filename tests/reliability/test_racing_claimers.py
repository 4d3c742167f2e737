"""Racing claimers: several processes dequeue from one SQLite store at once; no rollout is claimed twice."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from agl_core.store.sqlite import SqliteLightningStore

from .conftest import report

PROCESSES = 4
ROLLOUTS = 200

CLAIMER = textwrap.dedent(
    """
    import asyncio, json, sys
    from agl_core.store.sqlite import SqliteLightningStore

    async def main(path, worker):
        store = SqliteLightningStore(path)
        claimed = []
        try:
            while True:
                batch = await store.dequeue_many_rollouts(limit=3, worker_id=worker)
                if not batch:
                    break
                claimed.extend(r.rollout_id for r in batch)
        finally:
            await store.close()
        print(json.dumps(claimed))

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


async def _fill(path: Path) -> set[str]:
    store = SqliteLightningStore(path)
    try:
        return {
            r.rollout_id for r in await store.enqueue_many_rollouts([{"input": i} for i in range(ROLLOUTS)])
        }
    finally:
        await store.close()


def test_no_rollout_is_claimed_twice(tmp_path: Path) -> None:
    path = tmp_path / "race.db"
    enqueued = asyncio.run(_fill(path))
    started = time.perf_counter()
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMER, str(path), f"w{i}"], stdout=subprocess.PIPE, text=True
        )
        for i in range(PROCESSES)
    ]
    claims = [json.loads(worker.communicate(timeout=300)[0]) for worker in workers]
    seconds = time.perf_counter() - started
    flat = [rid for claim in claims for rid in claim]
    report(
        "racing-claimers",
        processes=PROCESSES,
        rollouts=ROLLOUTS,
        claimed=len(flat),
        claimed_twice=len(flat) - len(set(flat)),
        per_process=[len(c) for c in claims],
        seconds=round(seconds, 2),
    )
    assert all(worker.returncode == 0 for worker in workers)
    assert len(flat) == len(set(flat)), "a rollout was claimed twice"
    assert set(flat) == enqueued
