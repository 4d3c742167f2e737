"""The in-memory store's indexed queries return exactly what a scan of every record returns.

`InMemoryLightningStore` answers ``query_rollouts(status_in=...)``, the start-time sort and
``query_workers(status_in=...)`` from indexes kept up to date on every write. A random mix of writes
(with a clock that also stands still and steps back) is replayed, and after every few writes each
indexed query is compared with the answer computed here from the store's records.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agl_core.store._memory_index import RankSet
from agl_core.store.memory import InMemoryLightningStore
from agl_core.testing.clock import FakeClock
from agl_core.testing.store_conformance import make_span
from agl_core.types import ROLLOUT_STATUSES, Rollout

WORKER_STATUSES = ("idle", "busy", "unknown")
PAGES = ((-1, 0), (3, 0), (2, 1), (5, 4), (1, 100))


async def _random_write(store: InMemoryLightningStore, clock: FakeClock, rng: random.Random) -> None:
    step = rng.random()
    clock.set(clock() + rng.choice((0.0, 0.0, 0.5, 1.0, -2.0)))  # equal start times and a clock stepping back
    ids = list(store._state.rollouts)
    worker = f"w{rng.randrange(6)}"
    if step < 0.25 or not ids:
        await store.enqueue_rollout({"n": len(ids)})
    elif step < 0.4:
        await store.start_rollout({"n": len(ids)}, worker_id=worker)
    elif step < 0.55:
        await store.dequeue_rollout(worker_id=worker)
    elif step < 0.75:
        rollout = await store.get_rollout_by_id(rng.choice(ids))
        attempt = getattr(rollout, "attempt", None)
        if attempt is not None:
            status = rng.choice(("running", "succeeded", "failed", "preparing"))
            await store.update_attempt(attempt.rollout_id, attempt.attempt_id, status=status)
    elif step < 0.85:
        await store.update_rollout(rng.choice(ids), status=rng.choice(ROLLOUT_STATUSES))
    else:
        rollout = await store.get_rollout_by_id(rng.choice(ids))
        attempt = getattr(rollout, "attempt", None)
        if attempt is not None:
            await store.add_span(make_span(attempt.rollout_id, attempt.attempt_id, rng.randrange(1, 50)))


def _page(items: list[Any], limit: int, offset: int) -> list[Any]:
    return items[offset:] if limit == -1 else items[offset : offset + limit]


async def _check_queries(store: InMemoryLightningStore) -> None:
    state = store._state
    every: list[Rollout] = [state.view(rec) for rec in state.rollouts.values()]
    status_sets = [[s] for s in ROLLOUT_STATUSES] + [
        list(pair) for pair in itertools.combinations(ROLLOUT_STATUSES, 2)
    ]
    for statuses, (limit, offset) in itertools.product(status_sets, PAGES):
        expected = [r for r in every if r.status in statuses]
        got = await store.query_rollouts(status_in=statuses, limit=limit, offset=offset)
        assert got.total == len(expected)
        assert [r.rollout_id for r in got] == [r.rollout_id for r in _page(expected, limit, offset)]
        by_time = await store.query_rollouts(
            status_in=statuses, sort_by="start_time", sort_order="desc", limit=limit, offset=offset
        )
        expected_by_time = sorted(expected, key=lambda r: r.start_time, reverse=True)
        assert [r.rollout_id for r in by_time] == [
            r.rollout_id for r in _page(expected_by_time, limit, offset)
        ]
    for order, (limit, offset) in itertools.product(("asc", "desc"), PAGES):
        got = await store.query_rollouts(sort_by="start_time", sort_order=order, limit=limit, offset=offset)
        expected = sorted(every, key=lambda r: r.start_time, reverse=order == "desc")
        assert got.total == len(every)
        assert [r.rollout_id for r in got] == [r.rollout_id for r in _page(expected, limit, offset)]
        assert got.items == _page(expected, limit, offset)  # the views, latest attempt included
    workers = list(state.workers.values())
    for status, (limit, offset) in itertools.product(WORKER_STATUSES, PAGES):
        got_workers = await store.query_workers(status_in=[status], limit=limit, offset=offset)
        expected_workers = [w for w in workers if w.status == status]
        assert got_workers.total == len(expected_workers)
        assert got_workers.items == _page(expected_workers, limit, offset)


async def test_indexed_queries_match_a_scan_of_every_record() -> None:
    clock = FakeClock()
    store = InMemoryLightningStore(clock=clock, scan_debounce_seconds=0)
    rng = random.Random(21)
    for _round in range(12):
        for _ in range(25):
            await _random_write(store, clock, rng)
        await _check_queries(store)
    statuses = {rec.rollout.status for rec in store._state.rollouts.values()}
    assert len(statuses) >= 4, f"the random writes reached too few statuses: {statuses}"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 150)), max_size=400))
def test_a_rank_set_holds_what_a_set_holds_in_ascending_order(steps: list[tuple[bool, int]]) -> None:
    """`RankSet` (the status index's groups) against a plain set: every add/remove, in any order."""
    ranks, expected = RankSet(), set()
    for adding, rank in steps:
        if adding and rank not in expected:
            ranks.add(rank)
            expected.add(rank)
        elif not adding and rank in expected:
            ranks.remove(rank)
            expected.discard(rank)
        elif not adding:
            with pytest.raises(ValueError):
                ranks.remove(rank)
        assert len(ranks) == len(expected)
    assert list(ranks) == sorted(expected)


def test_a_rank_set_drains_from_its_front_and_refills() -> None:
    """The queue pattern: remove the lowest rank many times (dropped in bulk), then add below and above."""
    ranks = RankSet()
    for rank in range(1000):
        ranks.add(rank)
    for rank in range(900):
        ranks.remove(rank)
    ranks.add(5)  # below every rank left
    ranks.add(2000)
    ranks.remove(950)  # from the middle
    assert list(ranks) == [5, *range(900, 950), *range(951, 1000), 2000]
