"""Issue 3's race with worker PROCESSES: 8 processes x 2,000 rollouts x 10 spans on one database."""

from __future__ import annotations

import multiprocessing
import time
from collections import Counter

import pytest

from agl_core.types import EnqueueRolloutRequest
from agl_mongo import MongoLightningStore
from tests.race_worker import race_process

pytestmark = pytest.mark.slow

WORKERS = 8
ROLLOUTS = 2000
SPANS = 10
TIMEOUT = 900.0


async def test_processes_race_without_loss(mongo_uri: str, database: str) -> None:
    """No rollout is dequeued twice or never, no span is lost or duplicated, and every count is exact."""
    uri = f"{mongo_uri}&database={database}"
    store = MongoLightningStore.from_uri(uri)
    try:
        expected: list[str] = []
        for start in range(0, ROLLOUTS, 500):
            batch = [EnqueueRolloutRequest(input=i) for i in range(start, min(start + 500, ROLLOUTS))]
            expected.extend(r.rollout_id for r in await store.enqueue_many_rollouts(batch))
        assert len(set(expected)) == ROLLOUTS

        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(WORKERS)
        results = ctx.Queue()
        processes = [
            ctx.Process(target=race_process, args=(uri, f"proc-{i}", SPANS, barrier, results))
            for i in range(WORKERS)
        ]
        for process in processes:
            process.start()
        deadline = time.monotonic() + TIMEOUT
        reports = [results.get(timeout=max(1.0, deadline - time.monotonic())) for _ in processes]
        for process in processes:
            process.join(timeout=60)
        errors = [error for _, _, error in reports if error]
        assert not errors, errors[0]
        assert all(p.exitcode == 0 for p in processes)

        claims = [claim for _, claimed, _ in reports for claim in claimed]
        per_rollout = Counter(rid for rid, _ in claims)
        assert not [rid for rid, n in per_rollout.items() if n > 1], "a rollout was dequeued more than once"
        assert sorted(per_rollout) == sorted(expected), "some rollouts were never dequeued"
        assert all(claimed for _, claimed, _ in reports), "a worker process claimed nothing"
        for rid, aid in claims:
            spans = await store.query_spans(rid)
            assert spans.total == SPANS, f"rollout {rid} has {spans.total} spans, expected {SPANS}"
            assert [s.sequence_id for s in spans] == list(range(1, SPANS + 1)), rid
            assert len({s.span_id for s in spans}) == SPANS, rid
            assert {s.attempt_id for s in spans} == {aid}, rid
        succeeded = await store.query_rollouts(status_in=["succeeded"], limit=1)
        assert succeeded.total == ROLLOUTS
        stats = await store.statistics()
        assert (stats["total_rollouts"], stats["total_attempts"], stats["total_spans"]) == (
            ROLLOUTS,
            ROLLOUTS,
            ROLLOUTS * SPANS,
        )
        assert stats["total_workers"] == WORKERS
        assert sorted(w.status for w in await store.query_workers()) == ["idle"] * WORKERS
    finally:
        await store.close()
