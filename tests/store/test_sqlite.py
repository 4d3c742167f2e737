"""SQLite-specific behaviour of `SqliteLightningStore`: opening, durability, processes, migrations.

The shared contract is covered by the conformance suite (`tests/store/test_conformance.py`); these
tests cover what only a durable, multi-process store has to get right. Child processes are spawned
with ``python -c`` so a crash or a SIGKILL really ends a separate process; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agl_core.store import StoreClosedError, StoreError, open_store
from agl_core.store import _sqlite_schema as schema
from agl_core.store.errors import InvalidRequestError, RolloutNotFoundError
from agl_core.store.sqlite import SchemaVersionError, SqliteLightningStore
from agl_core.types import LLM, EnqueueRolloutRequest, PromptTemplate, RolloutConfig, Span
from agl_core.types.status import ATTEMPT_STATUSES, ROLLOUT_STATUSES
from agl_testing.clock import FakeClock

BOUND = 120.0
"""Upper bound (seconds) of every wait on a child process or a condition."""

REPO_ROOT = Path(__file__).resolve().parents[2]


def make_span(rollout_id: str, attempt_id: str, sequence_id: int, span_id: str, name: str = "step") -> Span:
    return Span.from_attributes(
        attributes={"index": sequence_id, "note": "Mixed Case"},
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        sequence_id=sequence_id,
        span_id=span_id,
        trace_id="a" * 32,
        name=name,
        start_time=1.0,
        end_time=2.0,
    )


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
async def store(db_path: Path) -> Any:
    opened = SqliteLightningStore(db_path, clock=FakeClock(), scan_debounce_seconds=0)
    yield opened
    await opened.close()


def raw(path: Path) -> sqlite3.Connection:
    """A plain read-only-by-convention connection to inspect the file the store wrote."""
    return sqlite3.connect(path, timeout=BOUND)


# ---------------------------------------------------------------------------------------------- opening


async def test_open_store_uri_goes_through_the_registry(plugin_manager: Any, tmp_path: Path) -> None:
    opened = open_store(f"sqlite:///{tmp_path / 'deep' / 'dir' / 'a.db'}", scan_debounce_seconds=0)
    try:
        assert isinstance(opened, SqliteLightningStore)
        assert opened.path == str(tmp_path / "deep" / "dir" / "a.db")
        assert opened.scan_debounce_seconds == 0
        rollout = await opened.enqueue_rollout({"q": 1})
        assert (tmp_path / "deep" / "dir" / "a.db").exists()
    finally:
        await opened.close()
    reopened = open_store(f"SQLITE:///{tmp_path / 'deep' / 'dir' / 'a.db'}")
    try:
        assert (await reopened.get_rollout_by_id(rollout.rollout_id)) == rollout
    finally:
        await reopened.close()


async def test_relative_uri_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    opened = SqliteLightningStore.from_uri("sqlite:///runs/relative%20name.db")
    try:
        assert opened.path == str(tmp_path / "runs" / "relative name.db")
        await opened.enqueue_rollout("x")
    finally:
        await opened.close()
    assert (tmp_path / "runs" / "relative name.db").exists()


async def test_memory_uri_gives_a_private_database() -> None:
    first = SqliteLightningStore.from_uri("sqlite:///:memory:")
    second = SqliteLightningStore.from_uri("sqlite:///:memory:")
    try:
        await first.enqueue_rollout("only here")
        assert (await first.statistics())["total_rollouts"] == 1
        assert (await second.statistics())["total_rollouts"] == 0
    finally:
        await first.close()
        await second.close()


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("sqlite://host/x.db", "three slashes"),
        ("sqlite:x.db", "three slashes"),
        ("sqlite:///", "names no file"),
        ("sqlite:///x.db?mode=ro", "keyword arguments"),
        ("memory:", "Not a SQLite store URI"),
    ],
)
def test_bad_uris_are_rejected_with_the_fix(uri: str, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        SqliteLightningStore.from_uri(uri)


def test_bad_constructor_arguments_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequestError, match="busy_timeout"):
        SqliteLightningStore(tmp_path / "a.db", busy_timeout=-1)
    with pytest.raises(InvalidRequestError, match="path"):
        SqliteLightningStore(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="scan_debounce_seconds"):
        SqliteLightningStore(tmp_path / "b.db", scan_debounce_seconds=-1)


async def test_capabilities_and_statistics(store: SqliteLightningStore) -> None:
    assert store.capabilities == {
        "thread_safe": True,
        "async_safe": True,
        "zero_copy": True,
        "otlp_traces": False,
    }
    empty = await store.statistics()
    for index in range(50):
        await store.enqueue_rollout({"payload": "x" * 2000, "index": index})
    stats = await store.statistics()
    assert stats["name"] == "SqliteLightningStore"
    assert stats["total_rollouts"] == 50
    assert stats["database_bytes"] > empty["database_bytes"] + 50 * 2000


# ---------------------------------------------------------------------------------------------- values


async def test_values_round_trip_as_json(store: SqliteLightningStore) -> None:
    rollout = await store.enqueue_rollout(
        {"nested": [1, 2.5, None, True, "é"], "big": 1e308, "tuple": (1, 2)},
        metadata={"owner": "me"},
        config=RolloutConfig(timeout_seconds=3.5, max_attempts=2, retry_condition=["timeout"]),
    )
    stored = await store.get_rollout_by_id(rollout.rollout_id)
    assert stored == rollout
    assert stored.input == {"nested": [1, 2.5, None, True, "é"], "big": 1e308, "tuple": [1, 2]}
    with pytest.raises(InvalidRequestError, match="NaN or Infinity"):  # JSON has none: refused (issue 20)
        await store.enqueue_rollout({"inf": float("inf")})
    assert stored.config == RolloutConfig(timeout_seconds=3.5, max_attempts=2, retry_condition=["timeout"])


async def test_values_that_are_not_json_are_rejected_before_anything_is_stored(
    store: SqliteLightningStore,
) -> None:
    with pytest.raises(InvalidRequestError, match="input must be JSON-serializable"):
        await store.enqueue_rollout(object())
    with pytest.raises(InvalidRequestError, match="metadata must be JSON-serializable"):
        await store.enqueue_rollout("ok", metadata={"bad": object()})
    with pytest.raises(InvalidRequestError, match="metadata must be a dict"):
        await store.enqueue_rollout("ok", metadata=["not", "a", "dict"])  # type: ignore[arg-type]
    assert (await store.statistics())["total_rollouts"] == 0


async def test_spans_read_back_identically_from_a_fresh_connection(
    store: SqliteLightningStore, db_path: Path
) -> None:
    attempted = await store.start_rollout("x")
    rollout_id, attempt_id = attempted.rollout_id, attempted.attempt.attempt_id
    # More spans than one read of missing rows takes, in shuffled sequence order.
    spans = [make_span(rollout_id, attempt_id, (k * 7) % 1201 + 1, f"s{k}") for k in range(1201)]
    assert len(await store.add_many_spans(spans)) == 1201
    expected = sorted(spans, key=lambda s: s.sequence_id)
    assert list(await store.query_spans(rollout_id)) == expected
    other = SqliteLightningStore(db_path)
    try:
        assert list(await other.query_spans(rollout_id)) == expected
        page = await other.query_spans(rollout_id, sort_order="desc", limit=3, offset=1)
        assert list(page) == expected[::-1][1:4] and page.total == 1201
    finally:
        await other.close()


# ---------------------------------------------------------------------------------------------- restart


async def test_close_and_reopen_keeps_everything(db_path: Path) -> None:
    clock = FakeClock()
    store = SqliteLightningStore(db_path, clock=clock, scan_debounce_seconds=0)
    queued = await store.enqueue_many_rollouts(
        [EnqueueRolloutRequest(input={"i": i}, mode="train") for i in range(5)]
    )
    claimed = await store.dequeue_rollout(worker_id="w1")
    assert claimed is not None and claimed.rollout_id == queued[0].rollout_id
    attempt_id = claimed.attempt.attempt_id
    first_ids = [await store.get_next_span_sequence_id(claimed.rollout_id, attempt_id) for _ in range(3)]
    await store.add_many_spans(
        [make_span(claimed.rollout_id, attempt_id, seq, f"s{seq}") for seq in first_ids]
    )
    await store.add_span(make_span(claimed.rollout_id, attempt_id, 10, "explicit"))
    resources = await store.add_resources({"llm": LLM(endpoint="http://a", model="m")})
    clock.advance(5)
    updated = await store.update_resources(
        resources.resources_id, {"p": PromptTemplate(template="t", engine="f-string")}
    )
    other = await store.add_resources({"llm": LLM(endpoint="http://b", model="m")})
    latest = await store.update_resources(
        resources.resources_id, {"llm": LLM(endpoint="http://c", model="m")}
    )
    await store.update_worker("w2", heartbeat_stats={"gpu": 0.5})
    before = {
        "rollouts": list(await store.query_rollouts()),
        "attempts": list(await store.query_attempts(claimed.rollout_id)),
        "spans": list(await store.query_spans(claimed.rollout_id)),
        "resources": list(await store.query_resources()),
        "workers": list(await store.query_workers()),
    }
    await store.close()

    reopened = SqliteLightningStore(db_path, clock=clock, scan_debounce_seconds=0)
    try:
        after = {
            "rollouts": list(await reopened.query_rollouts()),
            "attempts": list(await reopened.query_attempts(claimed.rollout_id)),
            "spans": list(await reopened.query_spans(claimed.rollout_id)),
            "resources": list(await reopened.query_resources()),
            "workers": list(await reopened.query_workers()),
        }
        assert after == before
        assert [r.resources_id for r in after["resources"]] == [resources.resources_id, other.resources_id]
        assert updated.version == 2 and latest.version == 3
        assert await reopened.get_latest_resources() == latest
        # The sequence counter continues above both the issued ids and the largest stored span id.
        assert await reopened.get_next_span_sequence_id(claimed.rollout_id, attempt_id) == 11
        # The queue keeps its FIFO order across the restart.
        order = [(await reopened.dequeue_rollout()).rollout_id for _ in range(4)]  # type: ignore[union-attr]
        assert order == [r.rollout_id for r in queued[1:]]
        assert await reopened.dequeue_rollout() is None
    finally:
        await reopened.close()


async def test_every_acknowledged_write_is_already_committed(
    store: SqliteLightningStore, db_path: Path
) -> None:
    """What another connection sees is on disk (in the WAL file), so it survives a killed process."""
    observer = raw(db_path)
    try:
        for index in range(20):
            rollout = await store.enqueue_rollout({"i": index})
            row = observer.execute("SELECT status FROM rollouts WHERE rollout_id = ?", (rollout.rollout_id,))
            assert row.fetchone() == ("queuing",)
        # Concurrent calls are committed in groups; each is answered only after its group's commit.
        calls = [asyncio.ensure_future(store.enqueue_rollout({"c": index})) for index in range(50)]
        for finished in asyncio.as_completed(calls):
            rollout = await finished
            row = observer.execute("SELECT 1 FROM rollouts WHERE rollout_id = ?", (rollout.rollout_id,))
            assert row.fetchone() == (1,)
    finally:
        observer.close()


async def test_close_commits_every_call_queued_before_it(db_path: Path) -> None:
    store = SqliteLightningStore(db_path)
    tasks = [asyncio.create_task(store.enqueue_rollout({"i": i})) for i in range(100)]
    await asyncio.sleep(0)  # every task has queued its call
    await store.close()
    rollouts = await asyncio.gather(*tasks)
    with pytest.raises(StoreClosedError):
        await store.enqueue_rollout("too late")
    await store.close()  # idempotent
    reopened = SqliteLightningStore(db_path)
    try:
        stored = await reopened.query_rollouts(rollout_id_in=[r.rollout_id for r in rollouts])
        assert stored.total == 100
    finally:
        await reopened.close()


def test_an_unclosed_store_stops_its_thread_when_collected(db_path: Path) -> None:
    import gc

    store = SqliteLightningStore(db_path)
    thread = store._executor._thread
    del store
    gc.collect()
    thread.join(timeout=BOUND)
    assert not thread.is_alive()


# ---------------------------------------------------------------------------------------------- migrations


def _user_version(path: Path) -> int:
    with raw(path) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


async def test_opening_an_older_file_runs_the_missing_migrations_once(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteLightningStore(db_path)
    rollout = await store.enqueue_rollout("kept")
    await store.close()
    current = max(schema.MIGRATIONS)
    assert _user_version(db_path) == current

    applied: list[int] = []

    def add_notes(conn: sqlite3.Connection) -> None:
        applied.append(current + 1)
        conn.execute("CREATE TABLE notes (text TEXT)")
        conn.execute("INSERT INTO notes VALUES ('migrated')")

    def add_column(conn: sqlite3.Connection) -> None:
        applied.append(current + 2)
        conn.execute("ALTER TABLE notes ADD COLUMN author TEXT DEFAULT 'agl'")

    monkeypatch.setattr(
        schema, "MIGRATIONS", {**schema.MIGRATIONS, current + 1: add_notes, current + 2: add_column}
    )
    upgraded = SqliteLightningStore(db_path)
    try:
        assert applied == [current + 1, current + 2]
        assert await upgraded.get_rollout_by_id(rollout.rollout_id) == rollout
    finally:
        await upgraded.close()
    assert _user_version(db_path) == current + 2
    with raw(db_path) as conn:
        assert conn.execute("SELECT text, author FROM notes").fetchall() == [("migrated", "agl")]
    await SqliteLightningStore(db_path).close()
    assert applied == [current + 1, current + 2]  # nothing re-applied on the next open


async def test_a_failing_migration_leaves_the_file_at_its_old_version(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await SqliteLightningStore(db_path).close()
    current = max(schema.MIGRATIONS)

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("migration bug")

    monkeypatch.setattr(schema, "MIGRATIONS", {**schema.MIGRATIONS, current + 1: broken})
    with pytest.raises(RuntimeError, match="migration bug"):
        SqliteLightningStore(db_path)
    assert _user_version(db_path) == current
    with raw(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'half_done'").fetchone() == (0,)


def test_a_file_from_a_newer_agl_is_refused(db_path: Path) -> None:
    SqliteLightningStore(db_path)._executor.request_stop()
    with raw(db_path) as conn:
        conn.execute("PRAGMA user_version = 999")
    with pytest.raises(SchemaVersionError, match=r"schema version 999.*Upgrade agl-core"):
        SqliteLightningStore(db_path)


def test_a_foreign_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with raw(path) as conn:
        conn.execute("CREATE TABLE customers (name TEXT)")
    with pytest.raises(SchemaVersionError, match="not an agl store"):
        SqliteLightningStore(path)
    with raw(path) as conn:
        conn.execute("PRAGMA application_id = 12345")
    with pytest.raises(SchemaVersionError, match="another application"):
        SqliteLightningStore(path)


# ---------------------------------------------------------------------------------------------- transactions


async def test_a_failing_call_among_queued_ones_rolls_back_only_itself(store: SqliteLightningStore) -> None:
    attempted = await store.start_rollout("x")
    release = threading.Event()
    # Hold the store's thread so the next calls queue up behind it.
    blocker = store._executor.submit(release.wait, (BOUND,), 0)
    await asyncio.sleep(0)
    calls = [
        store.enqueue_rollout("before"),
        store.add_many_spans(
            [
                make_span(attempted.rollout_id, attempted.attempt.attempt_id, 1, "kept"),
                make_span(attempted.rollout_id, "at-unknown", 2, "rolled-back"),
            ]
        ),
        store.update_attempt("ro-unknown", "latest", status="failed"),
        store.enqueue_rollout("after"),
        store.add_span(make_span(attempted.rollout_id, attempted.attempt.attempt_id, 3, "also-kept")),
    ]
    tasks = [asyncio.create_task(call) for call in calls]
    await asyncio.sleep(0)
    release.set()
    await blocker
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert results[0].input == "before" and results[3].input == "after"  # type: ignore[union-attr]
    assert isinstance(results[1], KeyError) and isinstance(results[2], RolloutNotFoundError)
    assert results[4] is not None
    spans = await store.query_spans(attempted.rollout_id)
    assert [s.span_id for s in spans] == ["also-kept"]
    assert (await store.statistics())["total_rollouts"] == 3


# ---------------------------------------------------------------------------------------------- store thread


async def test_the_default_span_query_orders_like_the_general_one(store: SqliteLightningStore) -> None:
    attempted = await store.start_rollout("x")
    rid, aid = attempted.rollout_id, attempted.attempt.attempt_id
    sequence_ids = [5, 1, 3, 1, 2, 5, 4]  # ties are broken by insertion order
    await store.add_many_spans([make_span(rid, aid, seq, f"s{i}") for i, seq in enumerate(sequence_ids)])
    fast = await store.query_spans(rid)  # the defaults
    general = await store.query_spans(rid, limit=100)  # the filter/sort/page builder
    assert (
        [s.span_id for s in fast]
        == [s.span_id for s in general]
        == ["s1", "s3", "s4", "s2", "s6", "s0", "s5"]
    )
    assert fast.total == general.total == 7 and (fast.limit, fast.offset) == (-1, 0)


async def test_every_call_runs_on_the_store_thread_in_order(db_path: Path) -> None:
    here = threading.get_ident()
    async with SqliteLightningStore(db_path) as store:
        executor = store._executor
        threads = await asyncio.gather(*(executor.submit(threading.get_ident, (), 0) for _ in range(10)))
        assert len(set(threads)) == 1 and threads[0] != here
        rollouts = await asyncio.gather(*(store.enqueue_rollout(i) for i in range(50)))
        assert [r.input for r in rollouts] == list(range(50))


async def test_store_calls_let_other_tasks_run(db_path: Path) -> None:
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    async with SqliteLightningStore(db_path) as store:
        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        before = ticks
        for _ in range(100):
            await store.get_latest_resources()
        during = ticks - before
        stop.set()
        await asyncio.wait_for(task, BOUND)
    assert during >= 99  # the loop ran the ticker between every two store calls


async def test_writes_keep_the_wal_bounded(db_path: Path) -> None:
    async with SqliteLightningStore(db_path) as store:
        wal = Path(f"{db_path}-wal")
        for i in range(1000):
            await store.enqueue_rollout(i)
        # 1,000 commits of ~5 pages (the row and the rollouts' indexes) make a ~22 MB WAL without
        # checkpoints that restart it; SQLite's automatic checkpoint (every 1,000 WAL pages) keeps it
        # near 4 MB: the bound is half the unchecked size.
        assert wal.stat().st_size < 11_000_000
        assert (await store.statistics())["total_rollouts"] == 1000
    with raw(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM rollouts").fetchone()[0] == 1000


async def test_the_event_loop_keeps_running_while_another_process_holds_the_lock(db_path: Path) -> None:
    store = SqliteLightningStore(db_path, busy_timeout=BOUND)
    holder = raw(db_path)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another connection owns the write lock
        pending = asyncio.create_task(store.enqueue_rollout("waits for the lock"))
        ticks = 0
        for _ in range(20):
            await asyncio.sleep(0.005)
            ticks += 1
        assert ticks == 20 and not pending.done()
        holder.execute("COMMIT")
        rollout = await asyncio.wait_for(pending, BOUND)
        assert rollout.status == "queuing"
    finally:
        holder.close()
        await store.close()


async def test_a_lock_held_longer_than_the_busy_timeout_fails_clearly(db_path: Path) -> None:
    store = SqliteLightningStore(db_path, busy_timeout=0.05)
    holder = raw(db_path)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreError, match=r"locked by another connection.*busy_timeout"):
            await store.enqueue_rollout("x")
        holder.execute("ROLLBACK")
        assert (await store.enqueue_rollout("x")).input == "x"  # usable again
    finally:
        holder.close()
        await store.close()


async def test_wait_for_rollouts_sees_a_finish_by_another_connection(db_path: Path) -> None:
    waiter = SqliteLightningStore(db_path)
    finisher = SqliteLightningStore(db_path)
    try:
        rollout = await waiter.enqueue_rollout("x")
        waiting = asyncio.create_task(
            waiter.wait_for_rollouts(rollout_ids=[rollout.rollout_id], timeout=BOUND)
        )
        await asyncio.sleep(0.01)
        assert not waiting.done()
        await finisher.update_rollout(rollout.rollout_id, status="cancelled")
        finished = await asyncio.wait_for(waiting, BOUND)
        assert [r.status for r in finished] == ["cancelled"]
    finally:
        await waiter.close()
        await finisher.close()


def test_hot_queries_use_their_indexes(tmp_path: Path) -> None:
    from agl_core.store import _sqlite_ops as ops

    conn = schema.open_connection(str(tmp_path / "plan.db"), busy_timeout=1)
    try:

        def plan(sql: str, params: tuple[Any, ...]) -> str:
            return " | ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))

        assert "rollouts_queue" in plan(ops._QUEUE_HEAD, ())
        assert "rollouts_watched" in plan(ops._UNHEALTHY_CANDIDATES, (1.0,))
        assert "SCAN" not in plan(ops._UNHEALTHY_CANDIDATES, (1.0,))
        rollout_spans = "SELECT data FROM spans WHERE rollout_id = ? ORDER BY sequence_id, ord"
        assert "USING INDEX spans_by_sequence (rollout_id=?)" in plan(rollout_spans, ("ro-1",))
        assert "spans_by_sequence (rollout_id=?)" in plan(ops._CURRENT_COUNTER, ("ro-1",))
        assert "PRIMARY KEY (rollout_id=? AND attempt_id=?)" in plan(ops._TOUCH_ATTEMPT, (1.0, "r", "a"))
        assert "(rollout_id=?)" in plan(ops._GIVEN_ATTEMPT_FOR_UPDATE, ("at-1", "ro-1"))
    finally:
        conn.close()


async def test_a_version_1_file_gains_the_query_indexes_and_keeps_its_data(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        patch.setattr(schema, "MIGRATIONS", {1: schema.MIGRATIONS[1]})
        old = SqliteLightningStore(db_path)
        kept = await old.start_rollout("kept", worker_id="w1")
        await old.close()
    assert _user_version(db_path) == 1
    store = SqliteLightningStore(db_path)
    try:
        assert _user_version(db_path) == max(schema.MIGRATIONS)
        found = await store.query_rollouts(status_in=["preparing"])
        assert [r.rollout_id for r in found] == [kept.rollout_id]
        assert [w.worker_id for w in await store.query_workers(status_in=["busy"])] == ["w1"]
    finally:
        await store.close()
    with raw(db_path) as conn:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"rollouts_by_status", "rollouts_by_start_time", "workers_by_status"} <= names


@pytest.fixture
def traced_statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SQL statements of the SQLite stores opened from now on, trigger statements included."""
    import agl_core.store.sqlite as sqlite_module

    executed: list[str] = []

    def traced_connection(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = schema.open_connection(*args, **kwargs)
        conn.set_trace_callback(executed.append)
        return conn

    monkeypatch.setattr(sqlite_module, "open_connection", traced_connection)
    return executed


async def test_status_filters_and_the_start_time_sort_read_their_indexes(
    tmp_path: Path, traced_statements: list[str]
) -> None:
    """The statements the store runs for these queries search an index instead of scanning a table."""
    executed = traced_statements
    store = SqliteLightningStore(tmp_path / "plans.db")
    try:
        await store.start_rollout("x", worker_id="w1")
        queries = {
            "rollouts_by_status": lambda: store.query_rollouts(status_in=["preparing"], limit=1),
            "rollouts_by_start_time": lambda: store.query_rollouts(
                sort_by="start_time", sort_order="desc", limit=1
            ),
            "workers_by_status": lambda: store.query_workers(status_in=["busy"], limit=1),
        }
        for index, query in queries.items():
            executed.clear()
            await query()
            selects = [sql for sql in executed if sql.lstrip().upper().startswith("SELECT")]
            assert selects, f"no SELECT traced for {index}"
            with sqlite3.connect(tmp_path / "plans.db") as conn:
                for sql in selects:
                    plan = " | ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
                    if "row_counts" in sql:  # the total of an unfiltered full page: the kept count
                        assert plan == "SEARCH row_counts USING PRIMARY KEY (name=?)", (sql, plan)
                    else:
                        assert index in plan, (sql, plan)
    finally:
        await store.close()


async def test_no_hot_operation_scans_a_table(tmp_path: Path, traced_statements: list[str]) -> None:
    """Every statement of the operations `bench/store_scaling.py` times finds its rows through an index
    or a primary key (their cost must not grow with the store); the start-time sort may walk its index
    in order, which its LIMIT stops."""
    executed = traced_statements
    store = SqliteLightningStore(tmp_path / "plans.db")
    try:
        started = await store.start_rollout("filled", worker_id="w0")
        await store.add_span(make_span(started.rollout_id, started.attempt.attempt_id, 1, "s0"))
        await store.update_attempt(started.rollout_id, started.attempt.attempt_id, status="succeeded")
        traced: dict[str, list[str]] = {}

        async def trace(name: str, call: Any) -> Any:
            executed.clear()
            result = await call
            traced[name] = list(executed)
            return result

        await trace("start_rollout", store.start_rollout("probe", worker_id="w1"))
        await trace("enqueue_rollout", store.enqueue_rollout("queued"))
        claimed = await trace("dequeue_rollout", store.dequeue_rollout(worker_id="w2"))
        assert claimed is not None
        rollout_id, attempt_id = claimed.rollout_id, claimed.attempt.attempt_id
        await trace("add_span", store.add_span(make_span(rollout_id, attempt_id, 1, "s1")))
        await trace("update_attempt", store.update_attempt(rollout_id, attempt_id, status="succeeded"))
        await trace("query_spans", store.query_spans(started.rollout_id))
        await trace("get_rollout_by_id", store.get_rollout_by_id(started.rollout_id))
        await trace("by_status", store.query_rollouts(status_in=["preparing"], limit=100))
        await trace("by_start_time", store.query_rollouts(sort_by="start_time", sort_order="desc", limit=1))
        await trace("workers_by_status", store.query_workers(status_in=["busy"]))
        with sqlite3.connect(tmp_path / "plans.db") as conn:
            for name, statements in traced.items():
                assert statements, f"nothing traced for {name}"
                for sql in statements:
                    sql = sql.strip().removeprefix("-- ")  # statements run by a trigger
                    if sql.split(None, 1)[0].upper() not in ("SELECT", "INSERT", "UPDATE", "DELETE"):
                        continue
                    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
                    for step in plan:
                        if not step.startswith("SCAN"):
                            continue
                        ordered_walk = name == "by_start_time" and "INDEX rollouts_by_start_time" in step
                        assert ordered_walk, (name, sql, plan)
    finally:
        await store.close()


async def test_unfiltered_totals_read_the_kept_row_counts(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, traced_statements: list[str]
) -> None:
    """A version 2 file gains counts equal to its rows; full pages of unfiltered queries then read them
    (no ``count(*)`` over the table) and their totals follow later inserts."""
    with monkeypatch.context() as patch:
        patch.setattr(schema, "MIGRATIONS", {v: schema.MIGRATIONS[v] for v in (1, 2)})
        old = SqliteLightningStore(db_path)
        for index in range(3):
            await old.start_rollout(f"old-{index}", worker_id=f"w{index}")
        await old.close()
    executed = traced_statements
    store = SqliteLightningStore(db_path)
    try:
        assert _user_version(db_path) == max(schema.MIGRATIONS)
        for added in range(3):
            executed.clear()
            rollouts = await store.query_rollouts(limit=1)
            workers = await store.query_workers(limit=1)
            assert (rollouts.total, workers.total) == (3 + added, 3 + added)
            assert not [sql for sql in executed if "count(*)" in sql.lower()], executed
            await store.enqueue_rollout(f"new-{added}")
            await store.update_worker(f"new-w{added}")
        # a filter still counts its matches
        assert (await store.query_rollouts(status_in=["queuing"], limit=1)).total == 3
    finally:
        await store.close()
    with raw(db_path) as conn:
        kept = dict(conn.execute("SELECT name, count FROM row_counts").fetchall())
        actual = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("rollouts", "workers")}
    assert kept == actual == {"rollouts": 6, "workers": 6}


def test_every_sortable_field_maps_to_a_column() -> None:
    from agl_core.store._sqlite_ops import ATTEMPT_SQL, RESOURCES_SQL, ROLLOUT_SQL, SPAN_SQL, WORKER_SQL
    from agl_core.store.logic import sortable_fields
    from agl_core.types import Attempt, ResourcesUpdate, Rollout, Worker

    for model, columns in (
        (Rollout, ROLLOUT_SQL),
        (Attempt, ATTEMPT_SQL),
        (Span, SPAN_SQL),
        (ResourcesUpdate, RESOURCES_SQL),
        (Worker, WORKER_SQL),
    ):
        assert set(sortable_fields(model)) <= set(columns), model.__name__


# ---------------------------------------------------------------------------------------------- processes


def _spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )


def _lines(stream: Any) -> Iterator[str]:
    """Yield lines of `stream` read by a helper thread, each wait bounded by `BOUND`."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    while True:
        line = lines.get(timeout=BOUND)
        if line is None:
            return
        yield line


DURABILITY_CHILD = """
    import asyncio, sys
    from agl_core.store.sqlite import SqliteLightningStore
    from agl_core.types import Span

    def say(*parts):
        print(*parts, flush=True)

    async def writer(store, lane):
        index = 0
        while True:
            index += 1
            rollout = await store.enqueue_rollout({"lane": lane, "index": index})
            say("R", rollout.rollout_id)
            claimed = await store.dequeue_rollout(worker_id=f"lane-{lane}")
            if claimed is None:
                continue
            attempt_id = claimed.attempt.attempt_id
            say("D", claimed.rollout_id, attempt_id)
            for k in range(3):
                seq = await store.get_next_span_sequence_id(claimed.rollout_id, attempt_id)
                span = Span.from_attributes(
                    attributes={"k": k}, rollout_id=claimed.rollout_id, attempt_id=attempt_id,
                    sequence_id=seq, span_id=f"{lane}-{index}-{k}", name="work",
                )
                if k == 2:
                    await store.add_many_spans([span])
                else:
                    await store.add_span(span)
                say("S", claimed.rollout_id, attempt_id, span.span_id, seq)
            status = "succeeded" if index % 2 else "failed"
            await store.update_attempt(claimed.rollout_id, attempt_id, status=status)
            say("U", claimed.rollout_id, attempt_id, status)

    async def main():
        store = SqliteLightningStore(sys.argv[1])
        await asyncio.gather(*(writer(store, lane) for lane in range(3)))

    asyncio.run(main())
"""


@pytest.mark.slow
async def test_acknowledged_writes_survive_sigkill(db_path: Path) -> None:
    child = _spawn(DURABILITY_CHILD, str(db_path))
    acknowledged: list[list[str]] = []
    try:
        for line in _lines(child.stdout):
            acknowledged.append(line.split())
            if len(acknowledged) >= 1500:
                break
        assert len(acknowledged) >= 1500, child.stderr.read() if child.stderr else ""
        os.kill(child.pid, signal.SIGKILL)  # mid-stream: the child writes until it dies
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=BOUND)
    assert child.returncode == -signal.SIGKILL

    store = SqliteLightningStore(db_path)
    try:
        for record in acknowledged:
            kind, rollout_id = record[0], record[1]
            rollout = await store.get_rollout_by_id(rollout_id)
            assert rollout is not None, record
            if kind == "D":
                attempts = await store.query_attempts(rollout_id)
                assert record[2] in {a.attempt_id for a in attempts}
            elif kind == "S":
                spans = await store.query_spans(rollout_id, record[2], span_id=record[3])
                assert [s.sequence_id for s in spans] == [int(record[4])]
            elif kind == "U":
                attempt = await store.get_latest_attempt(rollout_id)
                assert attempt is not None and attempt.status == record[3] and attempt.end_time is not None
                assert rollout.status == record[3]
        await _assert_consistent(store, db_path)
    finally:
        await store.close()


async def _assert_consistent(store: SqliteLightningStore, path: Path) -> None:
    """Statuses valid, ids unique, every span's rollout and attempt present, the file intact."""
    with raw(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    rollouts = await store.query_rollouts()
    for rollout in rollouts:
        assert rollout.status in ROLLOUT_STATUSES
        attempts = await store.query_attempts(rollout.rollout_id)
        assert [a.sequence_id for a in attempts] == list(range(1, len(attempts) + 1))
        assert all(a.status in ATTEMPT_STATUSES for a in attempts)
        if attempts:
            assert rollout.attempt == attempts[-1]  # type: ignore[union-attr]
        spans = await store.query_spans(rollout.rollout_id)
        attempt_ids = {a.attempt_id for a in attempts}
        assert all(s.attempt_id in attempt_ids for s in spans)
        assert len({s.sequence_id for s in spans}) == len(spans)
    stats = await store.statistics()
    total_spans = sum([len(await store.query_spans(r.rollout_id)) for r in rollouts])
    assert stats["total_spans"] == total_spans


RACE_WORKER = """
    import asyncio, sys
    from agl_core.store.sqlite import SqliteLightningStore
    from agl_core.types import Span

    async def main(path, name):
        store = SqliteLightningStore(path, busy_timeout=600)
        claimed = []
        try:
            while True:
                rollout = await store.dequeue_rollout(worker_id=name)
                if rollout is None:
                    break
                rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
                claimed.append(rid)
                ids = await store.get_many_span_sequence_ids([(rid, aid)] * 8)
                ids.append(await store.get_next_span_sequence_id(rid, aid))
                ids.append(await store.get_next_span_sequence_id(rid, aid))
                spans = [
                    Span.from_attributes(attributes={"by": name}, rollout_id=rid, attempt_id=aid,
                                         sequence_id=seq, span_id=f"span-{seq}", name="step")
                    for seq in ids
                ]
                await store.add_many_spans(spans[:8])
                await store.add_span(spans[8])
                await store.add_span(spans[9])
                await store.add_span(spans[9])  # a duplicate is ignored
                await store.update_attempt(rid, aid, status="succeeded")
        finally:
            await store.close()
        print("\\n".join(claimed), flush=True)

    asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.mark.slow
async def test_worker_processes_race_over_one_file_without_loss(db_path: Path) -> None:
    total, workers = 2000, 8
    store = SqliteLightningStore(db_path)
    try:
        enqueued = await store.enqueue_many_rollouts(
            [EnqueueRolloutRequest(input={"task": i}) for i in range(total)]
        )
    finally:
        await store.close()
    children = [_spawn(RACE_WORKER, str(db_path), f"worker-{k}") for k in range(workers)]
    claimed: list[str] = []
    deadline = time.monotonic() + 4 * BOUND
    for child in children:
        out, err = child.communicate(timeout=max(1.0, deadline - time.monotonic()))
        assert child.returncode == 0, err
        claimed.extend(line for line in out.splitlines() if line)

    assert len(claimed) == total and len(set(claimed)) == total  # no rollout dequeued twice
    assert set(claimed) == {r.rollout_id for r in enqueued}
    store = SqliteLightningStore(db_path)
    try:
        stats = await store.statistics()
        assert (stats["total_rollouts"], stats["total_attempts"], stats["total_spans"]) == (
            total,
            total,
            total * 10,
        )
        assert (await store.query_rollouts(status_in=["succeeded"])).total == total
        with raw(db_path) as conn:
            per_rollout = conn.execute(
                "SELECT count(*), count(DISTINCT span_id), min(sequence_id), max(sequence_id), "
                "count(DISTINCT sequence_id) FROM spans GROUP BY rollout_id"
            ).fetchall()
        assert set(per_rollout) == {(10, 10, 1, 10, 10)}
        workers_seen = await store.query_workers()
        assert workers_seen.total == workers and {w.status for w in workers_seen} == {"idle"}
        assert await store.dequeue_rollout() is None
    finally:
        await store.close()


# ------------------------------------------------------------------------------------- same semantics


_CONFIGS = [
    None,
    RolloutConfig(max_attempts=3, retry_condition=["failed", "timeout", "unresponsive"]),
    RolloutConfig(timeout_seconds=5.0, unresponsive_seconds=2.0, max_attempts=2, retry_condition=["timeout"]),
]
_OPS = st.one_of(
    st.tuples(st.just("enqueue"), st.integers(0, len(_CONFIGS) - 1)),
    st.tuples(st.just("start"), st.integers(0, len(_CONFIGS) - 1), st.sampled_from([None, "w1"])),
    st.tuples(st.just("dequeue"), st.integers(1, 3), st.sampled_from([None, "w1", "w2"])),
    st.tuples(st.just("attempt"), st.integers(0, 9), st.sampled_from(ATTEMPT_STATUSES)),
    st.tuples(st.just("rollout"), st.integers(0, 9), st.sampled_from(ROLLOUT_STATUSES)),
    st.tuples(st.just("retry"), st.integers(0, 9), st.sampled_from([None, "w2"])),
    st.tuples(st.just("span"), st.integers(0, 9), st.integers(0, 4)),
    st.tuples(st.just("advance"), st.sampled_from([0.5, 1.5, 3.0, 6.0])),
    st.tuples(
        st.just("query"),
        st.sampled_from([None, "start_time", "end_time", "status", "mode"]),
        st.sampled_from(["asc", "desc"]),
        st.sampled_from([-1, 1, 2]),
        st.integers(0, 2),
        st.sampled_from([None, ["running"], ["queuing", "requeuing"], ["failed", "succeeded"]]),
    ),
)


class _Replay:
    """Applies one operation to a store and renders the outcome with ids mapped to creation order."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.rollouts: list[str] = []

    def _id(self, value: str | None) -> Any:
        return self.rollouts.index(value) if value in self.rollouts else value

    def render(self, item: Any) -> Any:
        if item is None:
            return None
        data = item.model_dump(mode="json")
        data.pop("input", None)
        if "rollout_id" in data:
            data["rollout_id"] = self._id(data["rollout_id"])
        for key in ("attempt", None):
            target = data.get(key) if key else data
            if isinstance(target, dict):
                target.pop("attempt_id", None)
                if "rollout_id" in target:
                    target["rollout_id"] = self._id(target["rollout_id"])
        data.pop("current_attempt_id", None)
        if "current_rollout_id" in data:
            data["current_rollout_id"] = self._id(data["current_rollout_id"])
        return data

    async def apply(self, op: tuple[Any, ...]) -> Any:
        store, kind = self.store, op[0]
        pick = (lambda i: self.rollouts[i % len(self.rollouts)]) if self.rollouts else None
        try:
            if kind == "enqueue":
                rollout = await store.enqueue_rollout({"n": len(self.rollouts)}, config=_CONFIGS[op[1]])
                self.rollouts.append(rollout.rollout_id)
                return self.render(rollout)
            if kind == "start":
                rollout = await store.start_rollout("s", config=_CONFIGS[op[1]], worker_id=op[2])
                self.rollouts.append(rollout.rollout_id)
                return self.render(rollout)
            if kind == "dequeue":
                return [
                    self.render(r) for r in await store.dequeue_many_rollouts(limit=op[1], worker_id=op[2])
                ]
            if kind == "advance":
                return None
            if kind == "query":
                page = await store.query_rollouts(
                    sort_by=op[1], sort_order=op[2], limit=op[3], offset=op[4], status_in=op[5]
                )
                return [page.total, [self.render(r) for r in page]]
            if pick is None:
                return "no rollouts"
            rollout_id = pick(op[1])
            if kind == "attempt":
                return self.render(await store.update_attempt(rollout_id, "latest", status=op[2]))
            if kind == "rollout":
                return self.render(await store.update_rollout(rollout_id, status=op[2]))
            if kind == "retry":
                return self.render(await store.start_attempt(rollout_id, worker_id=op[2]))
            attempt = await store.get_latest_attempt(rollout_id)
            if attempt is None:
                return "no attempt"
            span = make_span(rollout_id, attempt.attempt_id, op[2], f"span-{op[2]}")
            added = await store.add_span(span)
            return None if added is None else self.render(await store.get_rollout_by_id(rollout_id))
        except Exception as exc:  # both stores must fail the same way
            return type(exc).__name__

    async def state(self) -> Any:
        store = self.store
        rollouts = [self.render(r) for r in await store.query_rollouts()]
        attempts = [[self.render(a) for a in await store.query_attempts(rid)] for rid in self.rollouts]
        spans = [[(s.span_id, s.sequence_id) for s in await store.query_spans(rid)] for rid in self.rollouts]
        workers = [self.render(w) for w in await store.query_workers()]
        counters = [await store.get_next_span_sequence_id(rid, "x") for rid in self.rollouts]
        queue = [self._id(r.rollout_id) for r in await store.dequeue_many_rollouts(limit=100)]
        return rollouts, attempts, spans, workers, counters, queue


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(_OPS, max_size=30))
def test_sqlite_and_memory_stores_agree_on_every_operation(ops: list[tuple[Any, ...]]) -> None:
    from agl_core.store.memory import InMemoryLightningStore

    async def scenario() -> None:
        clock = FakeClock()
        memory = _Replay(InMemoryLightningStore(clock=clock, scan_debounce_seconds=0))
        sqlite_store = SqliteLightningStore(":memory:", clock=clock, scan_debounce_seconds=0)
        durable = _Replay(sqlite_store)
        try:
            for op in ops:
                if op[0] == "advance":
                    clock.advance(op[1])
                assert await durable.apply(op) == await memory.apply(op), op
            assert await durable.state() == await memory.state()
        finally:
            await sqlite_store.close()

    asyncio.run(scenario())
