"""Transaction bodies of `SqliteLightningStore`: rollouts, attempts, the queue, workers and the watchdog.

Every method runs on the writer thread inside a transaction opened by `SqliteExecutor` (``BEGIN
IMMEDIATE`` for writes), so each one is atomic across threads *and* processes. Nothing mutable is
cached between transactions: every decision reads the rows it depends on inside the transaction.
Statuses, timestamps, worker fields and unhealthy-attempt detection come from `agl_core.store.logic`,
exactly as in the in-memory store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from pydantic_core import from_json

from agl_core.store import logic
from agl_core.store._sqlite_codec import (
    ATTEMPT_COLUMNS_A,
    ROLLOUT_COLUMNS,
    WORKER_COLUMNS,
    attempt_from_row,
    attempt_values,
    config_from_json,
    construct,
    dump_json,
    rollout_from_row,
    worker_from_row,
)
from agl_core.store._sqlite_executor import DeferredError
from agl_core.store._sqlite_query import Expr, InsertBuilder
from agl_core.store.base import UNSET
from agl_core.store.errors import AttemptNotFoundError, RolloutNotFoundError
from agl_core.types import Attempt, AttemptedRollout, Rollout, Worker
from agl_core.types.status import FINISHED_ROLLOUT_STATUSES, QUEUING_ROLLOUT_STATUSES

__all__ = ["NewRollout", "RowExists", "SqliteOps"]


_LATEST_RESOURCES = "(SELECT value FROM meta WHERE key = 'latest_resources_id')"
_QUEUE_TAIL_POS = (
    "(SELECT queue_pos FROM rollouts WHERE queue_pos IS NOT NULL ORDER BY queue_pos DESC LIMIT 1)"
)
# One statement per new rollout: the latest resources and the queue tail are read by subqueries, and
# an id collision (ON CONFLICT DO NOTHING returns no row) makes the caller draw another id.
_INSERT_ROLLOUT = InsertBuilder(
    "rollouts",
    (
        "rollout_id",
        "status",
        "start_time",
        "mode",
        "resources_id",
        "input",
        "config",
        "metadata",
        "queue_pos",
        "attempt_count",
        "latest_attempt_id",
        "timeout_seconds",
        "unresponsive_seconds",
    ),
    "ON CONFLICT (rollout_id) DO NOTHING RETURNING resources_id",
)
_LATEST_RESOURCES_EXPR = Expr(_LATEST_RESOURCES)
_QUEUE_TAIL_EXPR = Expr(f"coalesce({_QUEUE_TAIL_POS}, 0) + 1")
_INSERT_ATTEMPT = InsertBuilder(
    "attempts",
    ("rollout_id", "attempt_id", "sequence_id", "status", "start_time", "worker_id"),
    "ON CONFLICT (rollout_id, attempt_id) DO NOTHING",
)
_QUEUE_TAIL = "SELECT queue_pos FROM rollouts WHERE queue_pos IS NOT NULL ORDER BY queue_pos DESC LIMIT 1"
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
        self._worker_sql: dict[tuple[Any, ...], str] = {}
        self._attempt_sql: dict[tuple[Any, ...], str] = {}

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
        row = self.db.execute(_QUEUE_TAIL).fetchone()
        return 0 if row is None else int(row[0])

    def upsert_worker(self, worker_id: str, updates: dict[str, Any], *, returning: bool = False) -> Any:
        """Insert or update a worker with `updates` (the dicts of `logic.worker_updates_*`)."""
        # NULLs are inlined rather than bound (see `InsertBuilder`); one statement per shape.
        shape = (*((key, value is None) for key, value in updates.items()), returning)
        sql = self._worker_sql.get(shape)
        if sql is None:
            columns = "".join(", " + key for key in updates)
            slots = "".join(", NULL" if value is None else ", ?" for value in updates.values())
            assignments = ", ".join(f"{key} = excluded.{key}" for key in updates)
            conflict = f"DO UPDATE SET {assignments}" if updates else "DO NOTHING"
            sql = (
                f"INSERT INTO workers (worker_id{columns}) VALUES (?{slots}) "
                f"ON CONFLICT(worker_id) {conflict}" + (f" RETURNING {WORKER_COLUMNS}" if returning else "")
            )
            self._worker_sql[shape] = sql
        values = [worker_id]
        for key, value in updates.items():
            if value is not None:
                values.append(dump_json("heartbeat_stats", value) if key == "heartbeat_stats" else value)
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
            sql, params = _INSERT_ROLLOUT(
                (
                    rollout_id,
                    status,
                    now,
                    item.mode,
                    _LATEST_RESOURCES_EXPR if item.resources_id is None else item.resources_id,
                    item.input_json,
                    item.config_json,
                    item.metadata_json,
                    _QUEUE_TAIL_EXPR if queued else None,
                    0 if queued else 1,
                    attempt_id,
                    item.timeout_seconds,
                    item.unresponsive_seconds,
                )
            )
            row = self.db.execute(sql, params).fetchone()
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
            sql, params = _INSERT_ATTEMPT((rollout_id, attempt_id, sequence_id, "preparing", now, worker_id))
            if db.execute(sql, params).rowcount:
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
            shape = tuple((key, value is None) for key, value in changes.items())
            sql = self._attempt_sql.get(shape)
            if sql is None:  # NULLs inlined (see `InsertBuilder`); one statement per shape
                assignments = ", ".join(f"{key} = NULL" if null else f"{key} = ?" for key, null in shape)
                sql = self._attempt_sql[shape] = (
                    f"UPDATE attempts SET {assignments} WHERE rollout_id = ? AND attempt_id = ?"
                )
            params = [value for value in changes.values() if value is not None]
            db.execute(sql, (*params, rollout_id, values["attempt_id"]))
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
