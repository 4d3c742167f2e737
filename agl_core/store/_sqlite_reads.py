"""Read-only queries of `SqliteLightningStore`: rollouts, attempts, workers and the statistics counts.

Each function runs on the store's thread (autocommit for one SELECT, a read transaction when a page
also needs a COUNT) and takes the `SqliteOps` whose cursor it uses. Filters, sorting and pagination
are `logic`'s, translated to SQL by `agl_core.store._sqlite_query`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from agl_core.store import logic
from agl_core.store._sqlite_codec import (
    ATTEMPT_COLUMNS,
    ATTEMPT_COLUMNS_A,
    ROLLOUT_COLUMNS,
    ROLLOUT_COLUMNS_R,
    WORKER_COLUMNS,
    attempt_from_row,
    rollout_from_row,
    worker_from_row,
)
from agl_core.store._sqlite_ops import SqliteOps
from agl_core.store._sqlite_query import Column, order_by, page_total, where
from agl_core.types import Attempt, AttemptedRollout, PaginatedResult, Rollout, Worker

__all__ = [
    "ATTEMPT_SQL",
    "ROLLOUT_SQL",
    "WORKER_SQL",
    "counts",
    "get_latest_attempt",
    "get_rollout",
    "get_worker",
    "query_attempts",
    "query_rollouts",
    "query_workers",
    "rollouts_by_ids",
]

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
