"""The body of one worker process in the multi-process race (`test_concurrency`); importable by spawn."""

from __future__ import annotations

import asyncio
import traceback
from typing import Any

from agl_mongo import MongoLightningStore
from agl_testing.store_conformance import make_span


async def _race(uri: str, worker_id: str, n_spans: int, barrier: Any) -> list[tuple[str, str]]:
    store = MongoLightningStore.from_uri(uri)
    claims: list[tuple[str, str]] = []
    try:
        await store.get_latest_resources()  # connect before the start line
        barrier.wait(timeout=120)
        turn = 0
        while True:
            turn += 1
            if turn % 3 == 0:
                batch = list(await store.dequeue_many_rollouts(limit=2, worker_id=worker_id))
            else:
                one = await store.dequeue_rollout(worker_id=worker_id)
                batch = [] if one is None else [one]
            if not batch:
                return claims
            for claimed in batch:
                rid, aid = claimed.rollout_id, claimed.attempt.attempt_id
                claims.append((rid, aid))
                ids = await store.get_many_span_sequence_ids([(rid, aid)] * n_spans)
                inserted = await store.add_many_spans([make_span(rid, aid, s) for s in ids])
                if len(inserted) != n_spans:
                    raise AssertionError(f"{rid}: {len(inserted)} of {n_spans} spans inserted")
                await store.update_attempt(rid, aid, status="succeeded")
    finally:
        await store.close()


def race_process(uri: str, worker_id: str, n_spans: int, barrier: Any, results: Any) -> None:
    """Claim rollouts until none is left, give each `n_spans` spans and succeed it; report the claims."""
    try:
        results.put((worker_id, asyncio.run(_race(uri, worker_id, n_spans, barrier)), None))
    except BaseException:
        barrier.abort()
        results.put((worker_id, [], traceback.format_exc()))
