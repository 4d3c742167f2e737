"""Transaction bodies of `SqliteLightningStore`: rollouts, attempts, the queue, spans, resources, workers,
the watchdog and the reads.

Every function runs on the writer thread inside the transaction the store opened for it (``BEGIN
IMMEDIATE`` for writes), so each one is atomic across threads *and* processes, and takes the `SqliteOps`
whose cursor and clock it uses. Nothing mutable is cached between transactions: every decision reads
the rows it depends on inside the transaction. Statuses, timestamps, worker fields, unhealthy-attempt
detection, filters, sorting and pagination come from `agl_core.store.logic`, as in the in-memory store
(filters translated to SQL by `agl_core.store._sqlite_query`). The latest resources snapshot's id is
kept in the ``meta`` table, so every process sees the same "latest".
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from pydantic_core import from_json

from agl_core.store import logic
from agl_core.store._sqlite_codec import (
    ATTEMPT_COLUMNS,
    ATTEMPT_COLUMNS_A,
    RESOURCES_COLUMNS,
    ROLLOUT_COLUMNS,
    ROLLOUT_COLUMNS_R,
    WORKER_COLUMNS,
    attempt_from_row,
    attempt_values,
    config_from_json,
    construct,
    dump_json,
    resources_from_row,
    rollout_from_row,
    worker_from_row,
)
from agl_core.store._sqlite_query import Column, order_by, page_total, where
from agl_core.store.base import UNSET
from agl_core.store.errors import AttemptNotFoundError, RolloutNotFoundError
from agl_core.types import (
    Attempt,
    AttemptedRollout,
    PaginatedResult,
    ResourcesUpdate,
    Rollout,
    Span,
    Worker,
)
from agl_core.types.status import FINISHED_ROLLOUT_STATUSES, QUEUING_ROLLOUT_STATUSES
from agl_core.types.tracer import STORED_SPAN_CONTEXT


class DeferredError:
    """Job result meaning "commit what the job wrote, then raise `error` to the caller"."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


_QUEUE_TAIL_POS = "SELECT queue_pos FROM rollouts WHERE queue_pos IS NOT NULL ORDER BY queue_pos DESC LIMIT 1"
# One statement per new rollout: the latest resources (when none is given) and the queue tail (when it is
# queued) are read by subqueries; an id collision (no row returned) makes the caller draw another id.
_INSERT_ROLLOUT = (
    "INSERT INTO rollouts (rollout_id, status, start_time, mode, resources_id, input, config, metadata, "
    "queue_pos, attempt_count, latest_attempt_id, timeout_seconds, unresponsive_seconds) VALUES (?, ?, ?, ?, "
    "coalesce(?, (SELECT value FROM meta WHERE key = 'latest_resources_id')), ?, ?, ?, "
    f"CASE WHEN ? THEN coalesce(({_QUEUE_TAIL_POS}), 0) + 1 END, ?, ?, ?, ?) "
    "ON CONFLICT (rollout_id) DO NOTHING RETURNING resources_id"
)
_INSERT_ATTEMPT = (
    "INSERT INTO attempts (rollout_id, attempt_id, sequence_id, status, start_time, worker_id) "
    "VALUES (?, ?, ?, 'preparing', ?, ?) ON CONFLICT (rollout_id, attempt_id) DO NOTHING"
)
# The queue head with what a claim needs (RETURNING would cost more than this SELECT + UPDATE).
_QUEUE_HEAD = (
    f"SELECT ord, attempt_count, {ROLLOUT_COLUMNS} FROM rollouts WHERE queue_pos IS NOT NULL "
    "ORDER BY queue_pos LIMIT 1"
)
_CLAIM = (
    "UPDATE rollouts SET status = 'preparing', end_time = NULL, queue_pos = NULL, attempt_count = ?, "
    "latest_attempt_id = ? WHERE ord = ?"
)
_ATTEMPT_FOR_UPDATE = (
    f"SELECT r.ord, r.status, r.config, r.latest_attempt_id, r.queue_pos, {ATTEMPT_COLUMNS_A} "
    "FROM rollouts r LEFT JOIN attempts a ON a.rollout_id = r.rollout_id AND a.attempt_id = {} "
    "WHERE r.rollout_id = ?"
)
_GIVEN_ATTEMPT_FOR_UPDATE = _ATTEMPT_FOR_UPDATE.format("?")
_LATEST_ATTEMPT_FOR_UPDATE = _ATTEMPT_FOR_UPDATE.format("r.latest_attempt_id")
_ROLLOUT_FOR_ATTEMPT = f"SELECT ord, attempt_count, {ROLLOUT_COLUMNS} FROM rollouts WHERE rollout_id = ?"
_ID_TRIES = 64
_UNHEALTHY_CANDIDATES = (
    # INDEXED BY: without it the planner prefers the (larger) full status index of schema version 2.
    f"SELECT r.config, {ATTEMPT_COLUMNS_A} FROM rollouts r INDEXED BY rollouts_watched JOIN attempts a "
    "ON a.rollout_id = r.rollout_id AND a.attempt_id = r.latest_attempt_id "
    # These two terms repeat the condition of the rollouts_watched partial index, so it can be used.
    "WHERE r.status IN ('preparing', 'running') "
    "AND (r.timeout_seconds IS NOT NULL OR r.unresponsive_seconds IS NOT NULL) "
    "AND a.status IN ('preparing', 'running') "
    "AND ((r.timeout_seconds IS NOT NULL AND ?1 - a.start_time > r.timeout_seconds) "
    "OR (r.unresponsive_seconds IS NOT NULL "
    "AND ?1 - coalesce(a.last_heartbeat_time, a.start_time) > r.unresponsive_seconds)) "
    # Flagged rollouts are handled (and requeued) in creation order, as in the memory store.
    "ORDER BY r.ord"
)


class NewRollout(NamedTuple):
    """A validated rollout to create (JSON already encoded on the caller's thread)."""

    input_json: str
    mode: str | None
    resources_id: str | None
    config_json: str
    timeout_seconds: float | None
    unresponsive_seconds: float | None
    metadata_json: str | None


class RowExists:
    """``id in exists`` runs an indexed lookup (for `logic.draw_unique_id`)."""

    __slots__ = ("_args", "_db", "_sql")

    def __init__(self, db: sqlite3.Cursor, sql: str, *args: Any) -> None:
        self._db, self._sql, self._args = db, sql, args

    def __contains__(self, value: object) -> bool:
        return self._db.execute(self._sql, (*self._args, value)).fetchone() is not None


class SqliteOps:
    """The store's operations on the writer thread's connection (`db` is set once it is open)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.db: sqlite3.Cursor = None  # type: ignore[assignment]
        """One reusable cursor on the store's connection (every result is consumed before the next
        statement, so one cursor serves all; it saves creating a cursor per statement)."""
        self.finished_changed = False
        """Set when a rollout reached a finished status; the store wakes its waiters after the commit."""

    # ------------------------------------------------------------------ helpers

    def guarded(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """Run a watchdog scan, then ``fn(*args)``; the scan is kept even if `fn` fails."""
        self.scan()
        db = self.db
        db.execute("SAVEPOINT op")
        try:
            result = fn(*args)
        except Exception as exc:
            db.execute("ROLLBACK TO op")
            db.execute("RELEASE op")
            return DeferredError(exc)
        db.execute("RELEASE op")
        return result

    def _queue_tail(self) -> int:
        row = self.db.execute(_QUEUE_TAIL_POS).fetchone()
        return 0 if row is None else int(row[0])

    def upsert_worker(self, worker_id: str, updates: dict[str, Any], *, returning: bool = False) -> Any:
        """Insert or update a worker with `updates` (the dicts of `logic.worker_updates_*`)."""
        columns = "".join(", " + key for key in updates)
        assignments = ", ".join(f"{key} = excluded.{key}" for key in updates)
        sql = (
            f"INSERT INTO workers (worker_id{columns}) VALUES (?{', ?' * len(updates)}) "
            + "ON CONFLICT(worker_id) "
            + (f"DO UPDATE SET {assignments}" if updates else "DO NOTHING")
            + (f" RETURNING {WORKER_COLUMNS}" if returning else "")
        )
        values = [worker_id]
        for key, value in updates.items():
            is_stats = key == "heartbeat_stats" and value is not None
            values.append(dump_json("heartbeat_stats", value) if is_stats else value)
        cursor = self.db.execute(sql, values)
        return worker_from_row(cursor.fetchone()) if returning else None

    def _set_rollout_status(self, ord_: int, status: str, queue_pos: int | None, now: float) -> None:
        """Write a rollout status with its end time, queueing the rollout if the status requires it."""
        end_time = logic.rollout_end_time_for(status, now)
        if queue_pos is None and logic.should_enqueue(status):
            self.db.execute(
                "UPDATE rollouts SET status = ?, end_time = NULL, queue_pos = ? WHERE ord = ?",
                (status, self._queue_tail() + 1, ord_),
            )
        elif end_time is None:
            self.db.execute("UPDATE rollouts SET status = ?, end_time = NULL WHERE ord = ?", (status, ord_))
        else:
            self.db.execute(
                "UPDATE rollouts SET status = ?, end_time = ? WHERE ord = ?", (status, end_time, ord_)
            )
        if status in FINISHED_ROLLOUT_STATUSES:
            self.finished_changed = True

    # ------------------------------------------------------------------ creating and claiming

    def _insert_rollout(self, item: NewRollout, status: str, now: float, attempt_id: str | None) -> Rollout:
        """Insert one rollout (queued iff `status` is queuing) under a fresh id; return it."""
        queued = attempt_id is None
        for _ in range(_ID_TRIES):
            rollout_id = logic.new_rollout_id()
            params = (
                *(rollout_id, status, now, item.mode, item.resources_id, item.input_json, item.config_json),
                *(item.metadata_json, queued, 0 if queued else 1, attempt_id),
                *(item.timeout_seconds, item.unresponsive_seconds),
            )
            row = self.db.execute(_INSERT_ROLLOUT, params).fetchone()
            if row is not None:
                values = (rollout_id, item.input_json, now, None, item.mode, row[0], status)
                return rollout_from_row((*values, item.config_json, item.metadata_json))
        raise RuntimeError(f"Could not draw an unused rollout id after {_ID_TRIES} tries.")

    def enqueue(self, items: Sequence[NewRollout]) -> list[Rollout]:
        """Create `items` as ``queuing`` rollouts at the tail of the queue, in order."""
        now = self.clock()
        return [self._insert_rollout(item, "queuing", now, None) for item in items]

    def start_rollout(self, item: NewRollout, worker_id: str | None) -> AttemptedRollout:
        """Create a ``preparing`` rollout with attempt #1, outside the queue."""
        now = self.clock()
        attempt_id = logic.new_attempt_id()
        rollout = self._insert_rollout(item, "preparing", now, attempt_id)
        attempt = self._insert_attempt(rollout.rollout_id, attempt_id, 1, now, worker_id, None)
        self._book_worker(worker_id, attempt, now)
        values = dict(rollout.__dict__)
        values["attempt"] = attempt
        return construct(AttemptedRollout, values)

    def _insert_attempt(
        self,
        rollout_id: str,
        attempt_id: str,
        sequence_id: int,
        now: float,
        worker_id: str | None,
        ord_: int | None,
    ) -> Attempt:
        """Insert a ``preparing`` attempt; on an id already used by this rollout, draw another id.

        `ord_` is the rollout's row when its ``latest_attempt_id`` must follow a redrawn id.
        """
        db = self.db
        for _ in range(_ID_TRIES):
            if db.execute(_INSERT_ATTEMPT, (rollout_id, attempt_id, sequence_id, now, worker_id)).rowcount:
                break
            attempt_id = logic.new_attempt_id()
            if ord_ is not None:
                db.execute("UPDATE rollouts SET latest_attempt_id = ? WHERE ord = ?", (attempt_id, ord_))
        else:
            raise RuntimeError(f"Could not draw an unused attempt id after {_ID_TRIES} tries.")
        return construct(
            Attempt,
            {
                "rollout_id": rollout_id,
                "attempt_id": attempt_id,
                "sequence_id": sequence_id,
                "start_time": now,
                "end_time": None,
                "status": "preparing",
                "worker_id": worker_id,
                "last_heartbeat_time": None,
                "metadata": None,
            },
        )

    def _book_worker(self, worker_id: str | None, attempt: Attempt, now: float) -> None:
        """A new attempt carrying a worker makes that worker busy with it."""
        if worker_id:
            self.upsert_worker(
                worker_id,
                logic.worker_updates_for_attempt("preparing", attempt.rollout_id, attempt.attempt_id, now),
            )

    def _claim(self, row: Sequence[Any], now: float, worker_id: str | None) -> AttemptedRollout:
        """Give the rollout of `row` (``ord, attempt_count, ROLLOUT_COLUMNS``) a new ``preparing`` attempt.

        The new attempt is ``preparing``, so the rollout becomes ``preparing`` with no end time
        (`rollout_status_from_attempt`); a claim also takes it off the queue.
        """
        ord_, sequence_id = row[0], row[1] + 1
        attempt_id = logic.new_attempt_id()
        self.db.execute(_CLAIM, (sequence_id, attempt_id, ord_))
        attempt = self._insert_attempt(row[2], attempt_id, sequence_id, now, worker_id, ord_)
        return rollout_from_row(_restarted(row), attempt)  # type: ignore[return-value]

    def dequeue(self, limit: int, worker_id: str | None) -> list[AttemptedRollout]:
        """Claim up to `limit` queued rollouts in FIFO order (each gets a new ``preparing`` attempt).

        The new attempt is ``preparing``, so the rollout becomes ``preparing`` with no end time
        (`rollout_status_from_attempt`). Entries whose rollout left ``queuing``/``requeuing`` are dropped.
        """
        db = self.db
        now = self.clock()
        claimed: list[AttemptedRollout] = []
        while len(claimed) < limit:
            head = db.execute(_QUEUE_HEAD).fetchone()
            if head is None:
                break
            if head[8] in QUEUING_ROLLOUT_STATUSES:
                claimed.append(self._claim(head, now, worker_id))
            else:  # a stale entry: its rollout left the queue's statuses, so drop it
                db.execute("UPDATE rollouts SET queue_pos = NULL WHERE ord = ?", (head[0],))
        if worker_id:
            if claimed:
                last = claimed[-1]
                updates = logic.worker_updates_for_attempt(
                    "preparing", last.rollout_id, last.attempt.attempt_id, now, dequeue=True
                )
            else:
                current = db.execute(
                    "SELECT status FROM workers WHERE worker_id = ?", (worker_id,)
                ).fetchone()
                updates = logic.worker_updates_for_empty_dequeue(None if current is None else current[0], now)
            self.upsert_worker(worker_id, updates)
        return claimed

    def start_attempt(self, rollout_id: str, worker_id: str | None) -> AttemptedRollout:
        """A manual retry: a new ``preparing`` attempt; the rollout becomes ``preparing``."""
        row = self.db.execute(_ROLLOUT_FOR_ATTEMPT, (rollout_id,)).fetchone()
        if row is None:
            raise RolloutNotFoundError(rollout_id)
        now = self.clock()
        ord_, sequence_id = row[0], row[1] + 1
        attempt_id = logic.new_attempt_id()
        # Unlike a claim, a manual attempt leaves the queue entry (dequeue drops it as stale).
        self.db.execute(
            "UPDATE rollouts SET status = 'preparing', end_time = NULL, attempt_count = ?, "
            "latest_attempt_id = ? WHERE ord = ?",
            (sequence_id, attempt_id, ord_),
        )
        attempt = self._insert_attempt(row[2], attempt_id, sequence_id, now, worker_id, ord_)
        self._book_worker(worker_id, attempt, now)
        return rollout_from_row(_restarted(row), attempt)  # type: ignore[return-value]

    # ------------------------------------------------------------------ updates

    def update_rollout(self, rollout_id: str, changes: dict[str, Any]) -> Rollout:
        """Write the given columns (already encoded); ``status`` also sets the end time and queues."""
        db = self.db
        row = db.execute("SELECT ord, queue_pos FROM rollouts WHERE rollout_id = ?", (rollout_id,)).fetchone()
        if row is None:
            raise RolloutNotFoundError(rollout_id)
        ord_, queue_pos = row
        status = changes.get("status")
        if status is not None:
            now = self.clock()
            changes["end_time"] = logic.rollout_end_time_for(status, now)
            if queue_pos is None and logic.should_enqueue(status):
                changes["queue_pos"] = self._queue_tail() + 1
            if status in FINISHED_ROLLOUT_STATUSES:
                self.finished_changed = True
        if changes:
            assignments = ", ".join(f"{column} = ?" for column in changes)
            db.execute(f"UPDATE rollouts SET {assignments} WHERE ord = ?", (*changes.values(), ord_))
        updated = db.execute(f"SELECT {ROLLOUT_COLUMNS} FROM rollouts WHERE ord = ?", (ord_,)).fetchone()
        return rollout_from_row(updated)

    def update_attempt(
        self,
        rollout_id: str,
        attempt_id: str,
        status: Any,
        worker_id: Any,
        last_heartbeat_time: Any,
        metadata_json: Any,
    ) -> Attempt:
        """`LightningStore.update_attempt` with validated arguments (`UNSET` leaves a field alone)."""
        db = self.db
        if attempt_id == "latest":
            row = db.execute(_LATEST_ATTEMPT_FOR_UPDATE, (rollout_id,)).fetchone()
        else:
            row = db.execute(_GIVEN_ATTEMPT_FOR_UPDATE, (attempt_id, rollout_id)).fetchone()
        if row is None:
            raise RolloutNotFoundError(rollout_id)
        if row[5] is None:
            raise AttemptNotFoundError(rollout_id, attempt_id)
        ord_, rollout_status, config_json, latest_id, queue_pos = row[:5]
        values = attempt_values(row, 5)
        now = self.clock()
        changes: dict[str, Any] = {}
        if status is not UNSET:
            changes["status"] = status
            changes["end_time"] = logic.attempt_end_time_for(status, now)
        if worker_id is not UNSET:
            changes["worker_id"] = worker_id
        if last_heartbeat_time is not UNSET:
            changes["last_heartbeat_time"] = last_heartbeat_time
        if metadata_json is not UNSET:
            changes["metadata"] = metadata_json
        if changes:
            assignments = ", ".join(f"{key} = ?" for key in changes)
            sql = f"UPDATE attempts SET {assignments} WHERE rollout_id = ? AND attempt_id = ?"
            db.execute(sql, (*changes.values(), rollout_id, values["attempt_id"]))
            values.update(changes)
            if metadata_json is not UNSET:
                values["metadata"] = None if metadata_json is None else from_json(metadata_json)
        updated = construct(Attempt, values)
        if status is not UNSET:
            # Only the rollout's status and config matter to the propagation rule.
            new_status = logic.next_rollout_status(
                rollout_status,
                config_from_json(config_json),
                updated.sequence_id,
                status,
                is_latest=updated.attempt_id == latest_id,
            )
            if new_status is not None:
                self._set_rollout_status(ord_, new_status, queue_pos, now)
        # The attempt's worker after this update (the in-memory store does the same).
        if logic.worker_sync_required(worker_id, status, updated.worker_id) and updated.worker_id:
            self.upsert_worker(
                updated.worker_id,
                logic.worker_updates_for_attempt(updated.status, rollout_id, updated.attempt_id, now),
            )
        return updated

    # ------------------------------------------------------------------ watchdog

    def scan(self) -> None:
        """Flag timed-out/unresponsive latest attempts of active rollouts (`logic.scan_unhealthy`).

        SQL narrows the candidates with the same inequalities; `logic` makes the decision.
        """
        now = self.clock()
        rows = self.db.execute(_UNHEALTHY_CANDIDATES, (now,)).fetchall()
        if not rows:
            return
        flagged = logic.scan_unhealthy(
            ((attempt_from_row(row, 1), config_from_json(row[0])) for row in rows), now
        )
        for (rollout_id, attempt_id), status in flagged.items():
            self.update_attempt(rollout_id, attempt_id, status, UNSET, UNSET, UNSET)

    # ------------------------------------------------------------------ workers

    def update_worker(self, worker_id: str, updates: dict[str, Any]) -> Worker:
        """Upsert a worker's heartbeat fields and return it."""
        return self.upsert_worker(worker_id, updates, returning=True)  # type: ignore[no-any-return]


def _restarted(row: Sequence[Any]) -> tuple[Any, ...]:
    """`ROLLOUT_COLUMNS` of ``ord, attempt_count, ROLLOUT_COLUMNS`` after a new attempt: preparing, no end."""
    return (row[2], row[3], row[4], None, row[6], row[7], "preparing", row[9], row[10])


# ------------------------------------------------------------ reads: rollouts, attempts, workers, counts


ROLLOUT_SQL: dict[str, Column] = {
    "rollout_id": Column("r.rollout_id", True),
    "start_time": Column("r.start_time", False),
    "end_time": Column("r.end_time", False),
    "mode": Column("r.mode", True, "''"),
    "resources_id": Column("r.resources_id", True, "''"),
    "status": Column("r.status", True),
    "input": Column("r.input", True),  # JSON text: only `input_contains` filters it
}
"""Rollout fields that can be filtered or sorted in SQL (alias ``r``)."""

ATTEMPT_SQL: dict[str, Column] = {
    "rollout_id": Column("rollout_id", True),
    "attempt_id": Column("attempt_id", True),
    "sequence_id": Column("sequence_id", False),
    "start_time": Column("start_time", False),
    "end_time": Column("end_time", False),
    "status": Column("status", True),
    "worker_id": Column("worker_id", True, "''"),
    "last_heartbeat_time": Column("last_heartbeat_time", False),
}
"""Attempt fields that can be sorted in SQL."""

WORKER_SQL: dict[str, Column] = {
    "worker_id": Column("worker_id", True),
    "status": Column("status", True),
    "last_heartbeat_time": Column("last_heartbeat_time", False),
    "last_dequeue_time": Column("last_dequeue_time", False),
    "last_busy_time": Column("last_busy_time", False),
    "last_idle_time": Column("last_idle_time", False),
    "current_rollout_id": Column("current_rollout_id", True, "''"),
    "current_attempt_id": Column("current_attempt_id", True, "''"),
}
"""Worker fields that can be filtered or sorted in SQL."""

_WITH_LATEST = (
    f"SELECT {ROLLOUT_COLUMNS_R}, {ATTEMPT_COLUMNS_A} FROM rollouts r LEFT JOIN attempts a "
    "ON a.rollout_id = r.rollout_id AND a.attempt_id = r.latest_attempt_id"
)


def get_rollout(ops: SqliteOps, rollout_id: str) -> Rollout | AttemptedRollout | None:
    """The rollout with its latest attempt, or None."""
    row = ops.db.execute(_WITH_LATEST + " WHERE r.rollout_id = ?", (rollout_id,)).fetchone()
    return None if row is None else _rollout_with_attempt(row)


def get_latest_attempt(ops: SqliteOps, rollout_id: str) -> Attempt | None:
    """The attempt with the highest sequence id, or None."""
    row = ops.db.execute(
        f"SELECT {ATTEMPT_COLUMNS_A} FROM rollouts r JOIN attempts a "
        "ON a.rollout_id = r.rollout_id AND a.attempt_id = r.latest_attempt_id WHERE r.rollout_id = ?",
        (rollout_id,),
    ).fetchone()
    return None if row is None else attempt_from_row(row)


def table_rows(ops: SqliteOps, source: str, condition: str, params: Sequence[Any]) -> int:
    """The number of rows of `source` (``rollouts r`` or ``workers``) matching `condition`.

    With no condition (``"1"``) the count kept in ``row_counts`` is read (migration 3), so the total of
    an unfiltered page does not cost a walk over the whole table; a file opened read-only at an older
    schema version has no such table and is counted.
    """
    db = ops.db
    if condition == "1":
        try:
            return int(db.execute(_ROW_COUNT, (source.split()[0],)).fetchone()[0])
        except sqlite3.OperationalError:  # no row_counts: a read-only file of schema version < 3
            pass
    return int(db.execute(f"SELECT count(*) FROM {source} WHERE {condition}", params).fetchone()[0])


_ROW_COUNT = "SELECT count FROM row_counts WHERE name = ?"


def query_rollouts(
    ops: SqliteOps,
    normalized: logic.NormalizedFilter,
    sort_by: str | None,
    sort_order: str,
    limit: int,
    offset: int,
) -> PaginatedResult[Rollout | AttemptedRollout]:
    """Rollouts matching `normalized`, sorted and paginated, each with its latest attempt."""
    condition, params = where(normalized, ROLLOUT_SQL)
    order = order_by(sort_by, sort_order, Rollout, ROLLOUT_SQL, "r.ord")
    # the page first, then the join: joining before LIMIT/OFFSET would look up the latest attempt of every
    # row the offset skips (1 s for the last page of 100k rollouts, instead of ~20 ms)
    page = f"SELECT r.ord FROM rollouts r WHERE {condition} ORDER BY {order} LIMIT ? OFFSET ?"
    rows = ops.db.execute(
        f"{_WITH_LATEST} WHERE r.ord IN ({page}) ORDER BY {order}", (*params, limit, offset)
    ).fetchall()
    total = page_total(rows, limit, offset)
    if total is None:
        total = table_rows(ops, "rollouts r", condition, params)
    items = [_rollout_with_attempt(row) for row in rows]
    return logic.page_result(items, limit, offset, total)


def query_attempts(
    ops: SqliteOps, rollout_id: str, sort_by: str | None, sort_order: str, limit: int, offset: int
) -> PaginatedResult[Attempt]:
    """Attempts of one rollout, sorted and paginated (insertion order is sequence order)."""
    order = order_by(sort_by, sort_order, Attempt, ATTEMPT_SQL, "sequence_id")
    rows = ops.db.execute(
        f"SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE rollout_id = ? ORDER BY {order} LIMIT ? OFFSET ?",
        (rollout_id, limit, offset),
    ).fetchall()
    total = page_total(rows, limit, offset)
    if total is None:
        total = ops.db.execute(
            "SELECT count(*) FROM attempts WHERE rollout_id = ?", (rollout_id,)
        ).fetchone()[0]
    return logic.page_result([attempt_from_row(row) for row in rows], limit, offset, total)


def rollouts_by_ids(ops: SqliteOps, rollout_ids: Sequence[str]) -> dict[str, Rollout]:
    """The known rollouts among `rollout_ids`, by id (for `wait_for_rollouts`)."""
    unique = list(dict.fromkeys(rollout_ids))
    if not unique:
        return {}
    normalized = logic.NormalizedFilter((logic.FilterCondition("rollout_id", "within", unique),))
    condition, params = where(normalized, ROLLOUT_SQL)
    rows = ops.db.execute(f"SELECT {ROLLOUT_COLUMNS} FROM rollouts r WHERE {condition}", params)
    return {row[0]: rollout_from_row(row) for row in rows}


def get_worker(ops: SqliteOps, worker_id: str) -> Worker | None:
    """The worker with this id, or None."""
    row = ops.db.execute(f"SELECT {WORKER_COLUMNS} FROM workers WHERE worker_id = ?", (worker_id,)).fetchone()
    return None if row is None else worker_from_row(row)


def query_workers(
    ops: SqliteOps,
    normalized: logic.NormalizedFilter,
    sort_by: str | None,
    sort_order: str,
    limit: int,
    offset: int,
) -> PaginatedResult[Worker]:
    """Workers matching `normalized`, sorted and paginated."""
    condition, params = where(normalized, WORKER_SQL)
    order = order_by(sort_by, sort_order, Worker, WORKER_SQL, "ord")
    rows = ops.db.execute(
        f"SELECT {WORKER_COLUMNS} FROM workers WHERE {condition} ORDER BY {order} LIMIT ? OFFSET ?",
        (*params, limit, offset),
    ).fetchall()
    total = page_total(rows, limit, offset)
    if total is None:
        total = table_rows(ops, "workers", condition, params)
    return logic.page_result([worker_from_row(r) for r in rows], limit, offset, total)


# ------------------------------------------------------------------ statistics


def counts(ops: SqliteOps) -> tuple[int, int, int, int, int, int]:
    """Rollouts, attempts, spans, resources, workers and the database size in bytes."""
    row = ops.db.execute(
        "SELECT (SELECT count(*) FROM rollouts), (SELECT count(*) FROM attempts), "
        "(SELECT count(*) FROM spans), (SELECT count(*) FROM resources), (SELECT count(*) FROM workers), "
        "(SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size())"
    ).fetchone()
    return tuple(int(v or 0) for v in row)  # type: ignore[return-value]


def _rollout_with_attempt(row: Sequence[Any]) -> Rollout | AttemptedRollout:
    """A row of `_WITH_LATEST`: the rollout, with its latest attempt when it has one."""
    attempt = None if row[9] is None else attempt_from_row(row, 9)
    return rollout_from_row(row, attempt)


# ------------------------------------------------------------ spans and span sequence ids


SPAN_SQL: dict[str, Column] = {
    "rollout_id": Column("rollout_id", True),
    "attempt_id": Column("attempt_id", True),
    "sequence_id": Column("sequence_id", False),
    "trace_id": Column("trace_id", True, "''"),
    "span_id": Column("span_id", True),
    "parent_id": Column("parent_id", True, "''"),
    "name": Column("name", True, "''"),
    "start_time": Column("start_time", False),
    "end_time": Column("end_time", False),
}
"""Span fields that can be filtered or sorted in SQL."""


_SPAN_TARGET = (
    "SELECT r.ord, r.status, r.latest_attempt_id, a.status FROM rollouts r "
    "LEFT JOIN attempts a ON a.rollout_id = r.rollout_id AND a.attempt_id = ? WHERE r.rollout_id = ?"
)
_INSERT_SPAN = (
    "INSERT INTO spans (rollout_id, attempt_id, span_id, sequence_id, trace_id, name, data, parent_id, "
    "start_time, end_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (rollout_id, attempt_id, span_id) DO NOTHING"
)
_TOUCH_ATTEMPT = "UPDATE attempts SET last_heartbeat_time = ? WHERE rollout_id = ? AND attempt_id = ?"
_REVIVE_ATTEMPT = (
    "UPDATE attempts SET last_heartbeat_time = ?, status = ?, end_time = NULL "
    "WHERE rollout_id = ? AND attempt_id = ?"
)
_SET_ATTEMPT = (
    "UPDATE attempts SET last_heartbeat_time = ?, status = ?, end_time = ? "
    "WHERE rollout_id = ? AND attempt_id = ?"
)
# The last sequence id issued for a rollout: its counter, raised to the largest stored span id (an
# index seek on spans(rollout_id, sequence_id)), so adding a span never has to write the counter.
_CURRENT_COUNTER = (
    "SELECT max(coalesce((SELECT value FROM span_counters WHERE rollout_id = ?1), 0), "
    "coalesce((SELECT max(sequence_id) FROM spans WHERE rollout_id = ?1), 0))"
)
_SET_COUNTER = (
    "INSERT INTO span_counters (rollout_id, value) VALUES (?, ?) "
    "ON CONFLICT (rollout_id) DO UPDATE SET value = excluded.value"
)


# ---------------------------------------------------------------------------------------------- spans


def add_spans(ops: SqliteOps, spans: Sequence[Span], to_json: Callable[[Span], str]) -> list[Span]:
    """Insert validated spans; return those inserted (duplicates skipped), in order.

    Every span's rollout and attempt must exist (checked before anything is written). A span with
    ``sequence_id`` 0 gets the next id of its rollout (`logic.number_span`). Each attempt that received
    a span gets one heartbeat (`logic.heartbeat_transition`).
    """
    db = ops.db
    targets: dict[tuple[str, str], list[Any]] = {}
    for span in spans:
        key = (span.rollout_id, span.attempt_id)
        if key not in targets:
            row = db.execute(_SPAN_TARGET, (span.attempt_id, span.rollout_id)).fetchone()
            if row is None:
                raise RolloutNotFoundError(span.rollout_id)
            if row[3] is None:
                raise AttemptNotFoundError(span.rollout_id, span.attempt_id)
            targets[key] = [*row, False]
    inserted: list[Span] = []
    for span in spans:
        if not span.sequence_id:  # the counter covers every stored span, those of this batch too
            span = logic.number_span(span, _current_sequence_id(ops, span.rollout_id) + 1)
        row = (span.rollout_id, span.attempt_id, span.span_id, span.sequence_id, span.trace_id, span.name)
        row += (to_json(span), span.parent_id, span.start_time, span.end_time)
        if db.execute(_INSERT_SPAN, row).rowcount:
            inserted.append(span)
            targets[(span.rollout_id, span.attempt_id)][4] = True
    if inserted:
        now = ops.clock()
        for (rollout_id, attempt_id), (ord_, r_status, latest_id, a_status, touched) in targets.items():
            if touched:
                _heartbeat(ops, rollout_id, attempt_id, ord_, r_status, latest_id, a_status, now)
    return inserted


def _heartbeat(
    ops: SqliteOps,
    rollout_id: str,
    attempt_id: str,
    ord_: int,
    rollout_status: str,
    latest_id: str | None,
    attempt_status: str,
    now: float,
) -> None:
    """A span arrived for the attempt: refresh its heartbeat and apply `logic.heartbeat_transition`."""
    db = ops.db
    new_attempt, new_rollout = logic.heartbeat_transition(
        rollout_status, attempt_status, is_latest=attempt_id == latest_id
    )
    if new_attempt == attempt_status:
        db.execute(_TOUCH_ATTEMPT, (now, rollout_id, attempt_id))
    elif (end_time := logic.attempt_end_time_for(new_attempt, now)) is None:
        db.execute(_REVIVE_ATTEMPT, (now, new_attempt, rollout_id, attempt_id))
    else:
        db.execute(_SET_ATTEMPT, (now, new_attempt, end_time, rollout_id, attempt_id))
    if new_rollout is not None:
        end = logic.rollout_end_time_for(new_rollout, now)
        if end is None:
            db.execute("UPDATE rollouts SET status = ?, end_time = NULL WHERE ord = ?", (new_rollout, ord_))
        else:
            db.execute("UPDATE rollouts SET status = ?, end_time = ? WHERE ord = ?", (new_rollout, end, ord_))


def _current_sequence_id(ops: SqliteOps, rollout_id: str) -> int:
    row = ops.db.execute(_CURRENT_COUNTER, (rollout_id,)).fetchone()
    return int(row[0])


def sequence_ids(ops: SqliteOps, rollout_ids: Sequence[str]) -> list[int]:
    """Issue one sequence id per entry of `rollout_ids` (`logic.plan_sequence_ids`)."""
    issued, counters = logic.plan_sequence_ids(rollout_ids, lambda rid: _current_sequence_id(ops, rid))
    ops.db.executemany(_SET_COUNTER, counters.items())
    return issued


def query_spans(
    ops: SqliteOps,
    rollout_id: str,
    attempt_id: str | None,
    normalized: logic.NormalizedFilter,
    sort_by: str | None,
    sort_order: str,
    limit: int,
    offset: int,
) -> PaginatedResult[Span]:
    """Spans of one rollout (narrowed by its index, never scanning other rollouts), filtered and paged.

    ``attempt_id="latest"`` resolves to the latest attempt; no rollout or no attempt gives an empty page.
    """
    db = ops.db
    if attempt_id == "latest":
        row = db.execute(
            "SELECT latest_attempt_id FROM rollouts WHERE rollout_id = ?", (rollout_id,)
        ).fetchone()
        if row is None or row[0] is None:
            return logic.page_result([], limit, offset, 0)
        normalized = logic.NormalizedFilter(
            normalized.conditions,
            (*normalized.must, logic.FilterCondition("attempt_id", "exact", row[0])),
            normalized.aggregate,
        )
    condition, params = where(normalized, SPAN_SQL)
    order = order_by(sort_by, sort_order, Span, SPAN_SQL, "ord")
    spans = [
        Span.model_validate_json(row[0], context=STORED_SPAN_CONTEXT)
        for row in db.execute(
            f"SELECT data FROM spans WHERE {condition} ORDER BY {order} LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
    ]
    total = page_total(spans, limit, offset)
    if total is None:
        total = db.execute(f"SELECT count(*) FROM spans WHERE {condition}", params).fetchone()[0]
    return logic.page_result(spans, limit, offset, total)


# ------------------------------------------------------------ resources snapshots


RESOURCES_SQL: dict[str, Column] = {
    "resources_id": Column("resources_id", True),
    "create_time": Column("create_time", False),
    "update_time": Column("update_time", False),
    "version": Column("version", False),
}
"""Resources fields that can be filtered or sorted in SQL."""


def _set_latest(ops: SqliteOps, resources_id: str) -> None:
    ops.db.execute(
        "INSERT INTO meta (key, value) VALUES ('latest_resources_id', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (resources_id,),
    )


def add_resources(ops: SqliteOps, resources_json: str) -> ResourcesUpdate:
    """Store a new snapshot under a fresh id at version 1; it becomes the latest."""
    db = ops.db
    now = ops.clock()
    taken = RowExists(db, "SELECT 1 FROM resources WHERE resources_id = ?")
    resources_id = logic.draw_unique_id(logic.new_resources_id, taken)
    db.execute(
        "INSERT INTO resources (resources_id, create_time, update_time, version, resources) "
        "VALUES (?, ?, ?, 1, ?)",
        (resources_id, now, now, resources_json),
    )
    _set_latest(ops, resources_id)
    return resources_from_row((resources_id, now, now, 1, resources_json))


def update_resources(ops: SqliteOps, resources_id: str, resources_json: str) -> ResourcesUpdate:
    """Upsert: version 1 for an unknown id, else version + 1 with a new update time; becomes the latest."""
    db = ops.db
    now = ops.clock()
    row = db.execute(
        "UPDATE resources SET update_time = ?, version = version + 1, resources = ? WHERE resources_id = ? "
        f"RETURNING {RESOURCES_COLUMNS}",
        (now, resources_json, resources_id),
    ).fetchone()
    if row is None:
        db.execute(
            "INSERT INTO resources (resources_id, create_time, update_time, version, resources) "
            "VALUES (?, ?, ?, 1, ?)",
            (resources_id, now, now, resources_json),
        )
        row = (resources_id, now, now, 1, resources_json)
    _set_latest(ops, resources_id)
    return resources_from_row(row)


def get_resources(ops: SqliteOps, resources_id: str) -> ResourcesUpdate | None:
    """The snapshot with this id, or None."""
    row = ops.db.execute(
        f"SELECT {RESOURCES_COLUMNS} FROM resources WHERE resources_id = ?", (resources_id,)
    ).fetchone()
    return None if row is None else resources_from_row(row)


def get_latest_resources(ops: SqliteOps) -> ResourcesUpdate | None:
    """The most recently added or updated snapshot, or None."""
    row = ops.db.execute(
        f"SELECT {RESOURCES_COLUMNS} FROM resources WHERE resources_id = "
        "(SELECT value FROM meta WHERE key = 'latest_resources_id')"
    ).fetchone()
    return None if row is None else resources_from_row(row)


def query_resources(
    ops: SqliteOps,
    normalized: logic.NormalizedFilter,
    sort_by: str | None,
    sort_order: str,
    limit: int,
    offset: int,
) -> PaginatedResult[ResourcesUpdate]:
    """Snapshots matching `normalized`, sorted and paginated (insertion order by default)."""
    db = ops.db
    condition, params = where(normalized, RESOURCES_SQL)
    order = order_by(sort_by, sort_order, ResourcesUpdate, RESOURCES_SQL, "ord")
    rows = db.execute(
        f"SELECT {RESOURCES_COLUMNS} FROM resources WHERE {condition} ORDER BY {order} LIMIT ? OFFSET ?",
        (*params, limit, offset),
    ).fetchall()
    total = page_total(rows, limit, offset)
    if total is None:
        total = db.execute(f"SELECT count(*) FROM resources WHERE {condition}", params).fetchone()[0]
    return PaginatedResult(
        items=[resources_from_row(r) for r in rows], limit=limit, offset=offset, total=total
    )
