"""Behaviour specific to `InMemoryLightningStore` (the shared contract is in test_conformance.py).

Covers: opening through the registry, use from many threads and event loops, snapshots that later
updates never change, waiters woken across threads, lazily skipped stale queue entries, and stored
snapshots that equal validated models.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agl_core.store import (
    InvalidRequestError,
    InvalidSpanError,
    RolloutNotFoundError,
    StoreClosedError,
    open_store,
)
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import (
    AttemptedRollout,
    EnqueueRolloutRequest,
    RolloutConfig,
)
from agl_testing.clock import FakeClock
from agl_testing.store_conformance import make_span, run_in_threads

BOUND = 10.0  # seconds: upper bound of every wait in this module (they finish in milliseconds)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(clock: FakeClock) -> InMemoryLightningStore:
    return InMemoryLightningStore(clock=clock, scan_debounce_seconds=0)


@pytest.fixture
def fast_thread_switches() -> Iterator[None]:
    """Switch threads every 10 µs (instead of 5 ms) so that races, if any, actually happen."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


async def _until(condition: Callable[[], bool]) -> None:
    """Yield to other threads until `condition` holds (bounded by `BOUND`)."""
    deadline = time.monotonic() + BOUND
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.001)


# ---------------------------------------------------------------------------------------------- opening


async def test_open_store_memory_uri_builds_a_fresh_configured_store(clock: FakeClock) -> None:
    first = open_store("memory:", clock=clock, scan_debounce_seconds=0)
    second = open_store("MEMORY:")
    assert isinstance(first, InMemoryLightningStore) and isinstance(second, InMemoryLightningStore)
    assert first.scan_debounce_seconds == 0 and second.scan_debounce_seconds == 10.0
    await first.enqueue_rollout("only in the first store")
    assert (await first.statistics())["total_rollouts"] == 1
    assert (await second.statistics())["total_rollouts"] == 0
    assert (await first.query_rollouts())[0].start_time == clock()


@pytest.mark.parametrize("uri", ["memory://", "memory:shared", "memory:///tmp/x", "sqlite:///x.db", ""])
def test_from_uri_rejects_anything_but_memory(uri: str) -> None:
    with pytest.raises(InvalidRequestError, match="only the URI 'memory:'"):
        InMemoryLightningStore.from_uri(uri)


def test_capabilities_follow_thread_safety() -> None:
    assert InMemoryLightningStore().capabilities == {
        "thread_safe": True,
        "async_safe": True,
        "zero_copy": False,
        "otlp_traces": False,
    }
    assert InMemoryLightningStore(thread_safe=False).capabilities["thread_safe"] is False


async def test_statistics_report_class_name_and_uptime(clock: FakeClock) -> None:
    store = InMemoryLightningStore(clock=clock)
    clock.advance(12.5)
    stats = await store.statistics()
    assert stats["name"] == "InMemoryLightningStore"
    assert stats["uptime"] == 12.5


# ---------------------------------------------------------------------------------- threads and loops


async def test_store_outlives_event_loops(store: InMemoryLightningStore) -> None:
    """Loops come and go (asyncio.run per thread); the store keeps its data and keeps working."""

    async def enqueue_in_new_loop() -> str:
        return (await store.enqueue_rollout("from another loop")).rollout_id

    (first,) = await run_in_threads([enqueue_in_new_loop], BOUND)
    (second,) = await run_in_threads([enqueue_in_new_loop], BOUND)
    claimed = [await store.dequeue_rollout(), await store.dequeue_rollout()]
    assert [c.rollout_id for c in claimed if c is not None] == [first, second]


async def test_threads_with_their_own_loops_race_without_losing_anything(
    store: InMemoryLightningStore, fast_thread_switches: None
) -> None:
    """8 threads (each its own loop) claim 400 rollouts and add 5 spans each, twice (duplicates)."""
    queued = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(400)])

    async def worker(name: str) -> list[str]:
        claimed: list[str] = []
        while (item := await store.dequeue_rollout(worker_id=name)) is not None:
            spans = [
                make_span(item.rollout_id, item.attempt.attempt_id, n, span_id=f"{n:016x}")
                for n in (1, 2, 3, 4, 5)
            ]
            await store.add_many_spans(spans[:3])
            for span in spans:  # three are duplicates of the batch
                await store.add_span(span)
            await store.update_attempt(item.rollout_id, item.attempt.attempt_id, status="succeeded")
            claimed.append(item.rollout_id)
        return claimed

    results = await run_in_threads([functools.partial(worker, f"w{n}") for n in range(8)], 60.0)
    claimed = [rid for per_thread in results for rid in per_thread]
    assert sorted(claimed) == sorted(r.rollout_id for r in queued)  # each exactly once
    stats = await store.statistics()
    assert (stats["total_attempts"], stats["total_spans"], stats["total_workers"]) == (400, 2000, 8)
    succeeded = await store.query_rollouts(status_in=["succeeded"])
    assert succeeded.total == 400
    for rollout_id in claimed[:20]:
        assert [s.sequence_id for s in await store.query_spans(rollout_id)] == [1, 2, 3, 4, 5]


@pytest.mark.slow
async def test_threads_contending_on_one_rollout_stay_consistent(
    store: InMemoryLightningStore, fast_thread_switches: None
) -> None:
    """8 threads hammer the same rollout: sequence ids stay unique and duplicate spans are dropped."""
    rollout = await store.start_rollout("shared")
    rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
    spans = [make_span(rid, aid, n, span_id=f"{n:016x}") for n in range(1, 301)]

    async def contend() -> list[int]:
        issued = [await store.get_next_span_sequence_id(rid, aid) for _ in range(500)]
        for span in spans:  # every thread adds the same 300 spans
            await store.add_span(span)
        return issued

    results = await run_in_threads([contend] * 8, 60.0)
    issued = sorted(i for per_thread in results for i in per_thread)
    assert issued == list(range(1, 4001))
    stored = await store.query_spans(rid)
    assert [s.span_id for s in stored] == [s.span_id for s in spans]
    assert (await store.statistics())["total_spans"] == 300


async def test_single_loop_store_without_lock_serves_many_tasks() -> None:
    store = InMemoryLightningStore(thread_safe=False)
    await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(50)])

    async def drain() -> int:
        count = 0
        while await store.dequeue_rollout() is not None:
            count += 1
            await asyncio.sleep(0)  # interleave with the other tasks
        return count

    assert sum(await asyncio.gather(*(drain() for _ in range(5)))) == 50


# ---------------------------------------------------------------------------------------------- snapshots


async def test_returned_objects_never_change_after_later_updates(store: InMemoryLightningStore) -> None:
    queued = await store.enqueue_rollout({"q": 1}, metadata={"k": "v"})
    claimed = await store.dequeue_rollout(worker_id="w1")
    assert claimed is not None
    span_page = await store.query_spans(queued.rollout_id)
    worker_before = await store.get_worker_by_id("w1")
    attempts_before = await store.query_attempts(queued.rollout_id)

    await store.add_span(make_span(queued.rollout_id, claimed.attempt.attempt_id, 1))
    await store.update_attempt(queued.rollout_id, "latest", status="succeeded", metadata={"m": 1})
    await store.update_rollout(queued.rollout_id, metadata={"k": "changed"})

    assert (queued.status, queued.metadata, queued.end_time) == ("queuing", {"k": "v"}, None)
    assert (claimed.status, claimed.attempt.status, claimed.attempt.metadata) == (
        "preparing",
        "preparing",
        None,
    )
    assert claimed.attempt.last_heartbeat_time is None
    assert len(span_page) == 0
    assert worker_before is not None and worker_before.status == "busy"
    assert attempts_before[0].status == "preparing"
    now = await store.get_rollout_by_id(queued.rollout_id)
    assert isinstance(now, AttemptedRollout)
    assert (now.status, now.metadata, now.attempt.status) == ("succeeded", {"k": "changed"}, "succeeded")


async def test_caller_containers_are_copied_on_the_way_in(store: InMemoryLightningStore) -> None:
    metadata: dict[str, Any] = {"tags": "a"}
    config = RolloutConfig(max_attempts=2, retry_condition=["failed"])
    rollout = await store.enqueue_rollout("x", config=config, metadata=metadata)
    metadata["tags"] = "mutated"
    config.retry_condition.append("timeout")
    config.max_attempts = 9
    stored = await store.get_rollout_by_id(rollout.rollout_id)
    assert stored is not None
    assert stored.metadata == {"tags": "a"}
    assert stored.config == RolloutConfig(max_attempts=2, retry_condition=["failed"])


async def test_a_failed_batch_leaves_the_store_unchanged(store: InMemoryLightningStore) -> None:
    rollout = await store.start_rollout("x")
    good = make_span(rollout.rollout_id, rollout.attempt.attempt_id, 1)
    with pytest.raises(RolloutNotFoundError):
        await store.add_many_spans([good, make_span("ro-missing", rollout.attempt.attempt_id, 2)])
    bad = make_span(rollout.rollout_id, rollout.attempt.attempt_id, 3).model_copy(update={"span_id": ""})
    with pytest.raises(InvalidSpanError):
        await store.add_many_spans([good, bad])
    with pytest.raises(InvalidRequestError):
        await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=1), "not a request"])  # type: ignore[list-item]
    assert len(await store.query_spans(rollout.rollout_id)) == 0
    assert (await store.get_latest_attempt(rollout.rollout_id)).status == "preparing"  # type: ignore[union-attr]
    assert (await store.statistics())["total_rollouts"] == 1
    assert await store.add_many_spans([good, good]) == [good]  # the duplicate inside one batch is skipped


# ---------------------------------------------------------------------------------------------- queue


async def test_dequeue_skips_a_long_run_of_stale_entries(store: InMemoryLightningStore) -> None:
    queued = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(20_000)])
    for rollout in queued[:-10]:
        await store.update_rollout(rollout.rollout_id, status="cancelled")
    claimed = [await store.dequeue_rollout() for _ in range(11)]
    assert [c.rollout_id for c in claimed[:10] if c is not None] == [r.rollout_id for r in queued[-10:]]
    assert claimed[10] is None
    assert (await store.query_rollouts(status_in=["cancelled"])).total == 19_990


async def test_requeued_rollout_with_a_stale_entry_is_handed_out_once(store: InMemoryLightningStore) -> None:
    first = await store.enqueue_rollout("first")
    second = await store.enqueue_rollout("second")
    await store.update_rollout(first.rollout_id, status="running")  # its queue entry is now stale
    await store.update_rollout(first.rollout_id, status="requeuing")  # ...and valid again: not added twice
    order = [await store.dequeue_rollout() for _ in range(3)]
    assert [o.rollout_id for o in order if o is not None] == [first.rollout_id, second.rollout_id]
    assert order[2] is None


async def test_query_rollouts_by_ids_keeps_creation_order(store: InMemoryLightningStore) -> None:
    created = [await store.enqueue_rollout(i) for i in range(6)]
    wanted = [created[4].rollout_id, created[1].rollout_id, "ro-unknown", created[3].rollout_id]
    result = await store.query_rollouts(rollout_id_in=wanted)
    assert [r.rollout_id for r in result] == [created[i].rollout_id for i in (1, 3, 4)]
    await store.update_rollout(created[3].rollout_id, status="cancelled")
    narrowed = await store.query_rollouts(rollout_id_in=wanted, status_in=["cancelled"])
    assert [r.rollout_id for r in narrowed] == [created[3].rollout_id]


async def test_spans_added_out_of_order_are_sorted_stably(store: InMemoryLightningStore) -> None:
    rollout = await store.start_rollout("x")
    rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
    for seq, span_id in [(3, "a" * 16), (1, "b" * 16), (3, "c" * 16), (2, "d" * 16)]:
        await store.add_span(make_span(rid, aid, seq, span_id=span_id))
    ascending = [(s.sequence_id, s.span_id[0]) for s in await store.query_spans(rid)]
    assert ascending == [(1, "b"), (2, "d"), (3, "a"), (3, "c")]
    descending = [(s.sequence_id, s.span_id[0]) for s in await store.query_spans(rid, sort_order="desc")]
    assert descending == [(3, "a"), (3, "c"), (2, "d"), (1, "b")]
    unsorted = [s.span_id[0] for s in await store.query_spans(rid, sort_by=None)]
    assert unsorted == ["a", "b", "c", "d"]


# ---------------------------------------------------------------------------------------------- waiting


async def test_waiter_is_woken_by_a_finish_in_another_thread(store: InMemoryLightningStore) -> None:
    claimed = await store.start_rollout("x")  # no timeouts configured: the waiter never polls
    waiting = asyncio.create_task(store.wait_for_rollouts(rollout_ids=[claimed.rollout_id], timeout=3600))
    await asyncio.sleep(0)  # let the task register its waiter and suspend
    assert not waiting.done()

    def finish() -> None:
        asyncio.run(store.update_attempt(claimed.rollout_id, "latest", status="succeeded"))

    finisher = threading.Thread(target=finish)
    finisher.start()
    done = await asyncio.wait_for(waiting, BOUND)  # far below the 3600 s wait: woken, not timed out
    finisher.join(BOUND)
    assert [r.rollout_id for r in done] == [claimed.rollout_id]
    assert done[0].status == "succeeded"


async def test_waiters_on_many_loops_all_wake(store: InMemoryLightningStore) -> None:
    rollouts = [await store.start_rollout(i) for i in range(3)]
    ids = [r.rollout_id for r in rollouts]

    async def wait_in_own_loop() -> list[str]:
        return [r.rollout_id for r in await store.wait_for_rollouts(rollout_ids=ids, timeout=3600)]

    waiters = asyncio.ensure_future(run_in_threads([wait_in_own_loop] * 4, BOUND))
    await _until(lambda: store._state.waiters.waiting_on(ids[0]) == 4)  # all four registered
    for rollout in rollouts:
        await store.update_rollout(rollout.rollout_id, status="cancelled")
    assert await waiters == [ids] * 4


async def test_wait_returns_only_finished_and_cleans_up(store: InMemoryLightningStore) -> None:
    done = await store.start_rollout("done")
    pending = await store.start_rollout("pending")
    await store.update_attempt(done.rollout_id, "latest", status="failed")
    result = await store.wait_for_rollouts(
        rollout_ids=[pending.rollout_id, "ro-unknown", done.rollout_id], timeout=0.05
    )
    assert [r.rollout_id for r in result] == [done.rollout_id]
    cancelled = asyncio.create_task(store.wait_for_rollouts(rollout_ids=[pending.rollout_id]))
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert len(store._state.waiters) == 0  # timed-out and cancelled waits leave no registration behind


async def test_watchdog_times_out_a_rollout_while_someone_waits(
    store: InMemoryLightningStore, clock: FakeClock
) -> None:
    """Nobody else calls the store: the waiter's own periodic wake-up lets the watchdog act."""
    claimed = await store.start_rollout("x", config=RolloutConfig(timeout_seconds=30))
    waiting = asyncio.create_task(store.wait_for_rollouts(rollout_ids=[claimed.rollout_id]))
    await asyncio.sleep(0)
    clock.advance(31)
    (finished,) = await asyncio.wait_for(waiting, BOUND)
    assert finished.status == "failed"
    assert (await store.get_latest_attempt(claimed.rollout_id)).status == "timeout"  # type: ignore[union-attr]


async def test_close_fails_pending_and_later_waits(store: InMemoryLightningStore) -> None:
    rollout = await store.start_rollout("x")
    waiting = asyncio.create_task(store.wait_for_rollouts(rollout_ids=[rollout.rollout_id]))
    await asyncio.sleep(0)
    await store.close()
    with pytest.raises(StoreClosedError):
        await asyncio.wait_for(waiting, BOUND)
    with pytest.raises(StoreClosedError):
        await store.wait_for_rollouts(rollout_ids=[rollout.rollout_id], timeout=0)
    assert (await store.get_rollout_by_id(rollout.rollout_id)) is not None  # data stays readable


@pytest.mark.parametrize("rollout_ids", ["ro-abc", None, [1, 2]])
async def test_wait_rejects_malformed_ids(store: InMemoryLightningStore, rollout_ids: Any) -> None:
    with pytest.raises(InvalidRequestError, match="rollout_ids"):
        await store.wait_for_rollouts(rollout_ids=rollout_ids, timeout=0)


# ------------------------------------------------------------------------------------- snapshots


async def test_stored_snapshots_equal_validated_models() -> None:
    store = InMemoryLightningStore()
    await store.enqueue_rollout({"q": 1}, config={"timeout_seconds": 5.0, "max_attempts": 2})
    claimed = await store.dequeue_rollout(worker_id="w")
    assert claimed is not None
    for model in (claimed, claimed.attempt, claimed.config, await store.get_worker_by_id("w")):
        assert model is not None
        assert type(model).model_validate_json(model.model_dump_json()) == model


@pytest.mark.parametrize("times", [[1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 5.0], [3.0, 1.0, 2.0, 2.0, 0.5]])
async def test_start_time_sort_equals_a_stable_sort_of_every_rollout(times: list[float]) -> None:
    now = [0.0]
    store = InMemoryLightningStore(clock=lambda: now[0], scan_debounce_seconds=1e9)
    created = []
    for index, start in enumerate(times):
        now[0] = start
        created.append(await store.enqueue_rollout(index))
    for order in ("asc", "desc"):
        expected = [
            r.rollout_id for r in sorted(created, key=lambda r: r.start_time, reverse=order == "desc")
        ]
        for limit, offset in ((-1, 0), (2, 1), (3, 4)):
            page = await store.query_rollouts(
                sort_by="start_time", sort_order=order, limit=limit, offset=offset
            )
            stop = None if limit == -1 else offset + limit
            assert [r.rollout_id for r in page] == expected[offset:stop]
            assert page.total == len(times)
