"""0.3's collection-based store: `CollectionBasedLightningStore` over in-memory collections.

The whole store contract runs against it (both lock types), and the collections behave as 0.3 code that
uses them directly expects.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

import agl_core as agl
from agl_core.store.collection import (
    DequeBasedQueue,
    DictBasedKeyValue,
    InMemoryLightningCollections,
    ListBasedCollection,
)
from agl_core.store.collection.base import DuplicatedPrimaryKeyError
from agl_core.store.collection_based import CollectionBasedLightningStore, get_current_store_methods, tracked
from agl_testing.store_conformance import StoreConformance, StoreFactory


class TestCollectionBasedStore(StoreConformance):
    """The store on thread-locked in-memory collections (0.3's default for its in-memory store)."""

    concurrency_rollouts = 400

    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        """A fresh store on fresh collections, scanning before every guarded call."""
        return lambda clock: CollectionBasedLightningStore(
            InMemoryLightningCollections(lock_type="thread"), clock=clock, scan_debounce_seconds=0
        )


class TestCollectionBasedStoreAsyncioLocks(StoreConformance):
    """The store on asyncio-locked collections: one thread, any number of tasks."""

    supports_multiple_event_loops = False
    concurrency_rollouts = 400

    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        """A fresh store on asyncio-locked collections."""
        return lambda clock: CollectionBasedLightningStore(
            InMemoryLightningCollections(lock_type="asyncio"), clock=clock, scan_debounce_seconds=0
        )


class Item(BaseModel):
    group: str
    key: str
    score: float | None = None
    label: str = ""


@pytest.mark.asyncio
async def test_list_based_collection_crud_and_queries() -> None:
    items = ListBasedCollection([Item(group="a", key="1", score=2.0)], Item, ["group", "key"], id="items")
    await items.insert([Item(group="a", key="2", score=1.0), Item(group="b", key="1")])
    assert await items.size() == 3
    with pytest.raises(DuplicatedPrimaryKeyError):
        await items.insert([Item(group="a", key="1")])
    assert await items.size() == 3  # a failed insert adds nothing

    page = await items.query({"group": {"exact": "a"}}, sort={"name": "score", "order": "asc"})
    assert [i.key for i in page] == ["2", "1"] and page.total == 2
    # None sorts as the field type's zero; pagination counts every match.
    page = await items.query(sort={"name": "score", "order": "desc"}, limit=1, offset=1)
    assert [i.key for i in page] == ["2"] and page.total == 3
    either = await items.query({"_aggregate": "or", "key": {"exact": "2"}, "group": {"exact": "b"}})
    assert {(i.group, i.key) for i in either} == {("a", "2"), ("b", "1")}

    updated = await items.update([Item(group="a", key="1", score=9.0, label="new")], update_fields=["score"])
    assert updated[0].score == 9.0 and updated[0].label == ""  # only the named field changed
    kept = await items.upsert([Item(group="a", key="1", score=0.0)], update_fields=[])
    assert kept[0].score == 9.0  # get-or-insert leaves the existing item alone
    with pytest.raises(ValueError):
        await items.update([Item(group="z", key="9")])
    await items.delete([Item(group="b", key="1")])
    assert await items.get({"group": {"exact": "b"}}) is None
    with pytest.raises(TypeError):
        await items.insert([{"group": "a", "key": "3"}])  # type: ignore[list-item]


@pytest.mark.asyncio
async def test_queue_and_key_value() -> None:
    queue: DequeBasedQueue[str] = DequeBasedQueue(str)
    await queue.enqueue(["a", "b", "c"])
    assert await queue.peek(2) == ["a", "b"] and await queue.size() == 3
    assert await queue.dequeue(2) == ["a", "b"] and await queue.has("c")
    counters: DictBasedKeyValue[str, int] = DictBasedKeyValue()
    assert await counters.inc("r", 1) == 1 and await counters.inc("r", 2) == 3
    assert await counters.chmax("r", 2) == 3 and await counters.chmax("r", 7) == 7
    with pytest.raises(TypeError):
        await counters.inc("r", True)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_store_state_lives_in_the_collections() -> None:
    collections = InMemoryLightningCollections("thread")
    store = CollectionBasedLightningStore(collections)
    assert (
        isinstance(store, agl.LightningStore)
        and agl.CollectionBasedLightningStore is CollectionBasedLightningStore
    )
    rollout = await store.enqueue_rollout(input={"q": 1})
    assert [r.rollout_id for r in await collections.rollouts.query()] == [rollout.rollout_id]
    assert await collections.rollout_queue.peek() == [rollout.rollout_id]
    attempted = await store.dequeue_rollout(worker_id="w1")
    assert attempted is not None and await collections.rollout_queue.size() == 0
    stored = await collections.attempts.get({"rollout_id": {"exact": rollout.rollout_id}})
    assert stored is not None and stored.attempt_id == attempted.attempt.attempt_id
    worker = await collections.workers.get({"worker_id": {"exact": "w1"}})
    assert worker is not None and worker.status == "busy"


@pytest.mark.asyncio
async def test_tracked_names_the_running_store_methods() -> None:
    seen: list[tuple[str, str]] = []

    class Probe:
        @tracked("outer")
        async def outer(self) -> None:
            await self.inner()

        @tracked("inner")
        async def inner(self) -> None:
            seen.append(get_current_store_methods())

    await Probe().outer()
    assert seen == [("outer", "inner")]
    assert get_current_store_methods() == ("unknown", "unknown")


def test_metrics_tracker_is_refused_with_the_replacement() -> None:
    with pytest.raises(ValueError, match="statistics"):
        InMemoryLightningCollections("thread", tracker=object())
