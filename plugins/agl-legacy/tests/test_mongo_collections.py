"""Agent Lightning 0.3's Mongo collections (``agentlightning.store.collection.mongo``) on nx-27017."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import agl_core as agl
from agl_core.store.collection.base import DuplicatedPrimaryKeyError
from agl_core.store.collection.mongo import (
    MongoBasedCollection,
    MongoBasedKeyValue,
    MongoBasedQueue,
    MongoClientPool,
    MongoLightningCollections,
)


@pytest.fixture
async def pool(mongo_uri: str) -> AsyncIterator[MongoClientPool]:
    async with MongoClientPool(mongo_uri=mongo_uri) as pool:
        yield pool


def _worker(worker_id: str, status: str = "idle", **fields: Any) -> agl.Worker:
    return agl.Worker(worker_id=worker_id, status=status, **fields)  # type: ignore[arg-type]


async def test_names_resolve_to_agl_legacy() -> None:
    from agl_legacy.collection import mongo as collections

    assert MongoLightningCollections is collections.MongoLightningCollections
    assert MongoClientPool is collections.MongoClientPool


async def test_collection_crud_filters_sorting_and_partitions(pool: MongoClientPool, database: str) -> None:
    workers = MongoBasedCollection(pool, database, "workers", "run-a", ["worker_id"], agl.Worker)
    other = MongoBasedCollection(pool, database, "workers", "run-b", ["worker_id"], agl.Worker)
    await workers.insert([_worker("w-2", "busy"), _worker("w-1"), _worker("w-3", "busy")])
    await other.insert([_worker("w-1")])  # same key, other partition: no conflict
    with pytest.raises(DuplicatedPrimaryKeyError):
        await workers.insert([_worker("w-1")])
    assert (await workers.size(), await other.size()) == (3, 1)
    page = await workers.query(
        filter={"status": {"exact": "busy"}}, sort={"name": "worker_id", "order": "desc"}, limit=1
    )
    assert [w.worker_id for w in page.items] == ["w-3"] and page.total == 2
    either = await workers.query(
        filter={"_aggregate": "or", "worker_id": {"exact": "w-1"}, "status": {"exact": "busy"}}
    )
    assert sorted(w.worker_id for w in either.items) == ["w-1", "w-2", "w-3"]
    assert [
        w.worker_id for w in (await workers.query(filter={"worker_id": {"within": ["w-1", "w-9"]}})).items
    ] == ["w-1"]
    assert (await workers.get(filter={"worker_id": {"contains": "-2"}})).worker_id == "w-2"  # type: ignore[union-attr]
    assert [w.worker_id for w in (await workers.query(offset=1)).items] == ["w-1", "w-3"]  # insertion order
    with pytest.raises(ValueError, match="does not exist"):
        await workers.query(sort={"name": "nope", "order": "asc"})

    (updated,) = await workers.update([_worker("w-1", "busy", last_heartbeat_time=5.0)], ["status"])
    assert updated.status == "busy" and updated.last_heartbeat_time is None  # only status was written
    with pytest.raises(ValueError, match="does not exist"):
        await workers.update([_worker("w-9")])
    stored = await workers.upsert([_worker("w-1", "idle"), _worker("w-4")], update_fields=[])
    assert [w.status for w in stored] == ["busy", "idle"]  # existing left as is, new one inserted
    await workers.delete([_worker("w-4")])
    with pytest.raises(ValueError, match="does not exist"):
        await workers.delete([_worker("w-4")])
    assert await workers.size() == 3 and await other.size() == 1


async def test_queue_is_fifo_and_key_value_counts_atomically(pool: MongoClientPool, database: str) -> None:
    queue = MongoBasedQueue(pool, database, "rollout_queue", "p", str)
    assert await queue.enqueue(["ro-1", "ro-2", "ro-3"]) == ["ro-1", "ro-2", "ro-3"]
    assert await queue.has("ro-2") and not await queue.has("ro-9")
    assert await queue.peek(2) == ["ro-1", "ro-2"] and await queue.size() == 3
    assert await queue.dequeue(2) == ["ro-1", "ro-2"]
    assert await queue.dequeue(5) == ["ro-3"] and await queue.dequeue() == [] and await queue.size() == 0
    with pytest.raises(TypeError):
        await queue.enqueue([1])  # type: ignore[list-item]

    counters = MongoBasedKeyValue(pool, database, "span_sequence_ids", "p", str, int)
    assert await counters.inc("ro-1", 1) == 1 and await counters.inc("ro-1", 2) == 3
    assert await counters.chmax("ro-1", 2) == 3 and await counters.chmax("ro-1", 10) == 10
    await counters.set("ro-2", 7)
    assert await counters.get("ro-2") == 7 and await counters.has("ro-2") and await counters.size() == 2
    assert await counters.pop("ro-2") == 7 and await counters.pop("ro-2", -1) == -1
    with pytest.raises(TypeError):
        await counters.inc("ro-1", "x")  # type: ignore[arg-type]


async def test_collection_based_store_on_mongo_collections(pool: MongoClientPool, database: str) -> None:
    """0.3's ``CollectionBasedLightningStore(MongoLightningCollections(...))`` runs the store contract."""
    collections = MongoLightningCollections(pool, database, "run-7")
    store = agl.CollectionBasedLightningStore(collections, scan_debounce_seconds=0)
    rollout = await store.enqueue_rollout(input={"q": "2+2"})
    claimed = await store.dequeue_rollout(worker_id="w-1")
    assert claimed is not None and claimed.rollout_id == rollout.rollout_id
    span = agl.Span.from_attributes(
        rollout_id=claimed.rollout_id,
        attempt_id=claimed.attempt.attempt_id,
        sequence_id=await store.get_next_span_sequence_id(claimed.rollout_id, claimed.attempt.attempt_id),
        name="llm",
        attributes={"agentlightning.operation.name": "llm", "gen_ai.usage.input_tokens": 3},
    )
    await store.add_span(span)
    await store.update_attempt(claimed.rollout_id, claimed.attempt.attempt_id, status="succeeded")
    (finished,) = await store.wait_for_rollouts(rollout_ids=[rollout.rollout_id], timeout=30)
    assert finished.status == "succeeded"
    (stored,) = await store.query_spans(rollout.rollout_id)
    assert stored.name == "llm" and stored.attributes["gen_ai.usage.input_tokens"] == 3
    stats = await store.statistics()
    assert (stats["total_rollouts"], stats["total_attempts"], stats["total_spans"]) == (1, 1, 1)
    # A second store on the same database and partition sees the same state (another process would too).
    again = agl.CollectionBasedLightningStore(MongoLightningCollections(pool, database, "run-7"))
    assert [r.status for r in await again.query_rollouts()] == ["succeeded"]
    elsewhere = agl.CollectionBasedLightningStore(MongoLightningCollections(pool, database, "other"))
    assert list(await elsewhere.query_rollouts()) == []


async def test_execute_without_commit_runs_in_an_atomic_block(pool: MongoClientPool, database: str) -> None:
    collections = MongoLightningCollections(pool, database, "p")

    async def count_and_queue(c: MongoLightningCollections) -> int:
        await c.rollout_queue.enqueue(["ro-1"])
        return await c.rollout_queue.size()

    assert await collections.execute(count_and_queue) == 1
    with pytest.raises(ValueError, match="execute"):
        async with collections.atomic(commit=True):
            pass
