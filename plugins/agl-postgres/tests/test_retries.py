"""Calls retried after a lost acknowledgement: the earlier try committed, the retry must not apply twice."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import pytest
from agl_postgres import PostgresLightningStore
from agl_postgres.connection import Call

from agl_testing.store_conformance import make_span


class LoseFirstAnswer:
    """Runs each store call once for real, then reports the connection lost (the answer never arrived).

    The store's retry loop then runs the call again with ``retrying=True``, as after a network failure
    between PostgreSQL's commit and the client reading the reply.
    """

    def __init__(self, store: PostgresLightningStore) -> None:
        self.lost = 0
        self._run = store._db.run
        store._db.run = self.run  # type: ignore[method-assign]

    async def run(self, call: Call[Any]) -> Any:
        answered = False

        async def once_lost(conn: Any, retrying: bool) -> Any:
            nonlocal answered
            result = await call(conn, retrying)
            if not answered:
                answered = True
                self.lost += 1
                raise asyncpg.exceptions.ConnectionDoesNotExistError("reply lost (test)")
            return result

        return await self._run(once_lost)


@pytest.fixture
async def store(postgres_uri: str, schema: str) -> AsyncIterator[PostgresLightningStore]:
    opened = PostgresLightningStore(f"{postgres_uri}?schema={schema}")
    try:
        yield opened
    finally:
        await opened.close()


async def _with_lost_answer(store: PostgresLightningStore, call: Callable[[], Awaitable[Any]]) -> Any:
    lossy = LoseFirstAnswer(store)
    try:
        return await call()
    finally:
        store._db.run = lossy._run  # type: ignore[method-assign]
        assert lossy.lost >= 1, "the call did not reach the server"  # (a watchdog scan may be first)


async def test_retried_writes_apply_once(store: PostgresLightningStore) -> None:
    """enqueue, start_rollout, dequeue, start_attempt, add_span and add_many_spans apply once each."""
    enqueued = await _with_lost_answer(store, lambda: store.enqueue_rollout({"q": 1}))
    assert [r.rollout_id for r in await store.query_rollouts()] == [enqueued.rollout_id]

    claimed = await _with_lost_answer(store, lambda: store.dequeue_rollout(worker_id="w1"))
    assert claimed is not None and claimed.rollout_id == enqueued.rollout_id
    attempts = await store.query_attempts(enqueued.rollout_id)
    assert [a.attempt_id for a in attempts] == [claimed.attempt.attempt_id]

    retried = await _with_lost_answer(store, lambda: store.start_attempt(enqueued.rollout_id, worker_id="w1"))
    attempts = await store.query_attempts(enqueued.rollout_id)
    assert [a.attempt_id for a in attempts] == [claimed.attempt.attempt_id, retried.attempt.attempt_id]
    assert retried.attempt.sequence_id == 2 and retried.status == "preparing"
    worker = await store.get_worker_by_id("w1")
    assert worker is not None and worker.current_attempt_id == retried.attempt.attempt_id

    started = await _with_lost_answer(store, lambda: store.start_rollout({"q": 2}))
    assert len(await store.query_rollouts()) == 2
    assert len(await store.query_attempts(started.rollout_id)) == 1

    rid, aid = retried.rollout_id, retried.attempt.attempt_id
    added = await _with_lost_answer(store, lambda: store.add_span(make_span(rid, aid, 1, span_id="s1")))
    assert added is not None
    batch = [make_span(rid, aid, 2 + i, span_id=f"b{i}") for i in range(3)]
    stored = await _with_lost_answer(store, lambda: store.add_many_spans(batch))
    assert [s.span_id for s in stored] == ["b0", "b1", "b2"]
    assert [s.span_id for s in await store.query_spans(rid)] == ["s1", "b0", "b1", "b2"]


async def test_retried_attempt_update_is_applied_once(store: PostgresLightningStore) -> None:
    """A retried ``update_attempt(status=...)`` leaves the same state as one call."""
    started = await store.start_rollout({"q": 1}, worker_id="w1")
    rid, aid = started.rollout_id, started.attempt.attempt_id
    updated = await _with_lost_answer(store, lambda: store.update_attempt(rid, aid, status="succeeded"))
    assert updated.status == "succeeded" and updated.end_time is not None
    rollout = await store.get_rollout_by_id(rid)
    assert rollout is not None and rollout.status == "succeeded"
    worker = await store.get_worker_by_id("w1")
    assert worker is not None and worker.status == "idle" and worker.current_rollout_id is None
