"""8 worker PROCESSES race over 2,000 rollouts on one schema: each is claimed exactly once."""

from __future__ import annotations

import multiprocessing
import time
from collections import Counter

import pytest
from agl_postgres import PostgresLightningStore

from agl_core.types import EnqueueRolloutRequest
from tests.race_worker import race_process

pytestmark = pytest.mark.slow

WORKERS = 8
ROLLOUTS = 2000
SPANS = 2
TIMEOUT = 600.0


async def test_processes_claim_each_rollout_exactly_once(postgres_uri: str, schema: str) -> None:
    """No rollout is claimed twice or never, no span is lost, every count is exact, every worker idle."""
    uri = f"{postgres_uri}?schema={schema}"
    store = PostgresLightningStore.from_uri(uri)
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

        claims = [claim for _, claimed, _ in reports for claim in claimed]
        per_rollout = Counter(rid for rid, _ in claims)
        assert not [rid for rid, n in per_rollout.items() if n > 1], "a rollout was claimed more than once"
        assert sorted(per_rollout) == sorted(expected), "some rollouts were never claimed"
        assert sum(1 for _, claimed, _ in reports if claimed) >= 2, "the work was not shared"
        succeeded = await store.query_rollouts(status_in=["succeeded"], limit=1)
        assert succeeded.total == ROLLOUTS
        stats = await store.statistics()
        assert (stats["total_rollouts"], stats["total_attempts"], stats["total_spans"]) == (
            ROLLOUTS,
            ROLLOUTS,
            ROLLOUTS * SPANS,
        )
        for rid, _ in claims[:50]:
            assert [s.sequence_id for s in await store.query_spans(rid)] == list(range(1, SPANS + 1))
        assert sorted(w.status for w in await store.query_workers()) == ["idle"] * WORKERS
    finally:
        await store.close()


async def test_concurrent_watchdogs_flag_each_attempt_once(postgres_uri: str, schema: str) -> None:
    """Four stores scanning at once time out each stale attempt once: one retry attempt per rollout."""
    import asyncio

    from agl_core.types import RolloutConfig
    from agl_testing.clock import FakeClock

    clock = FakeClock()
    uri = f"{postgres_uri}?schema={schema}"
    stores = [PostgresLightningStore.from_uri(uri, clock=clock, scan_debounce_seconds=0) for _ in range(4)]
    try:
        config = RolloutConfig(timeout_seconds=5, max_attempts=2, retry_condition=["timeout"])
        await stores[0].enqueue_many_rollouts(
            [EnqueueRolloutRequest(input=i, config=config) for i in range(40)]
        )
        claimed = await stores[0].dequeue_many_rollouts(limit=40, worker_id="w")
        assert len(claimed) == 40
        clock.advance(10)
        await asyncio.gather(*(store.query_workers() for store in stores for _ in range(3)))
        rollouts = await stores[1].query_rollouts()
        assert {r.status for r in rollouts} == {"requeuing"}
        for rollout in rollouts:
            attempts = await stores[2].query_attempts(rollout.rollout_id)
            assert [a.status for a in attempts] == ["timeout"]
        requeued = await stores[3].dequeue_many_rollouts(limit=100)
        assert len(requeued) == 40 and {r.attempt.sequence_id for r in requeued} == {2}
    finally:
        for store in stores:
            await store.close()
