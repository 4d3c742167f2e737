"""Read-only queries of `PostgresLightningStore`: rollouts, attempts, workers, statistics.

Filters, sorting and pagination are the shared rules of `agl_core.store.logic`, translated by
`agl_postgres.query`; a page that needs a total beyond itself runs a COUNT.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agl_core.store import logic
from agl_core.types import Attempt, AttemptedRollout, PaginatedResult, Rollout, Worker
from agl_postgres.codec import (
    ATTEMPT_COLUMNS,
    ROLLOUT_COLUMNS,
    WORKER_COLUMNS,
    attempt_from_row,
    rollout_from_row,
    worker_from_row,
)
from agl_postgres.query import Column, limit_clause, order_by, page_total, where

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
    "rollout_id": Column("a.rollout_id", True),
    "attempt_id": Column("a.attempt_id", True),
    "sequence_id": Column("a.sequence_id", False),
    "start_time": Column("a.start_time", False),
    "end_time": Column("a.end_time", False),
    "status": Column("a.status", True),
    "worker_id": Column("a.worker_id", True, "''"),
    "last_heartbeat_time": Column("a.last_heartbeat_time", False),
}
"""Attempt fields that can be sorted in SQL (alias ``a``)."""

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
    f"SELECT {ROLLOUT_COLUMNS}, {ATTEMPT_COLUMNS} FROM rollouts r LEFT JOIN attempts a "
    "ON a.rollout_id = r.rollout_id AND a.attempt_id = r.latest_attempt_id"
)


def _with_attempt(row: Sequence[Any]) -> Rollout | AttemptedRollout:
    attempt = None if row[9] is None else attempt_from_row(row, 9)
    return rollout_from_row(row, attempt)


async def get_rollout(conn: Any, rollout_id: str) -> Rollout | AttemptedRollout | None:
    """The rollout with its latest attempt, or None."""
    row = await conn.fetchrow(_WITH_LATEST + " WHERE r.rollout_id = $1::text", rollout_id)
    return None if row is None else _with_attempt(row)


async def get_latest_attempt(conn: Any, rollout_id: str) -> Attempt | None:
    """The attempt with the highest sequence id, or None."""
    row = await conn.fetchrow(
        f"SELECT {ATTEMPT_COLUMNS} FROM rollouts r JOIN attempts a "
        "ON a.rollout_id = r.rollout_id AND a.attempt_id = r.latest_attempt_id WHERE r.rollout_id = $1::text",
        rollout_id,
    )
    return None if row is None else attempt_from_row(row)


async def query_rollouts(
    conn: Any,
    normalized: logic.NormalizedFilter,
    sort_by: str | None,
    sort_order: str,
    limit: int,
    offset: int,
) -> PaginatedResult[Rollout | AttemptedRollout]:
    """Rollouts matching `normalized`, sorted and paged, each with its latest attempt."""
    params: list[Any] = []
    condition = where(normalized, ROLLOUT_SQL, params)
    order = order_by(sort_by, sort_order, Rollout, ROLLOUT_SQL, "r.ord")
    count_params = list(params)
    page = limit_clause(limit, offset, params)
    rows = await conn.fetch(f"{_WITH_LATEST} WHERE {condition} ORDER BY {order} {page}", *params)
    total = page_total(rows, limit, offset)
    if total is None:
        total = await conn.fetchval(f"SELECT count(*) FROM rollouts r WHERE {condition}", *count_params)
    return PaginatedResult(
        items=[_with_attempt(row) for row in rows], limit=limit, offset=offset, total=total
    )


async def query_attempts(
    conn: Any, rollout_id: str, sort_by: str | None, sort_order: str, limit: int, offset: int
) -> PaginatedResult[Attempt]:
    """Attempts of one rollout, sorted and paged (insertion order is sequence order)."""
    order = order_by(sort_by, sort_order, Attempt, ATTEMPT_SQL, "a.sequence_id")
    params: list[Any] = [rollout_id]
    page = limit_clause(limit, offset, params)
    rows = await conn.fetch(
        f"SELECT {ATTEMPT_COLUMNS} FROM attempts a WHERE a.rollout_id = $1::text ORDER BY {order} {page}",
        *params,
    )
    total = page_total(rows, limit, offset)
    if total is None:
        total = await conn.fetchval("SELECT count(*) FROM attempts WHERE rollout_id = $1::text", rollout_id)
    return PaginatedResult(
        items=[attempt_from_row(row) for row in rows], limit=limit, offset=offset, total=total
    )


async def rollouts_by_ids(conn: Any, rollout_ids: Sequence[str]) -> dict[str, Rollout]:
    """The known rollouts among `rollout_ids`, by id (for `wait_for_rollouts`)."""
    rows = await conn.fetch(
        f"SELECT {ROLLOUT_COLUMNS} FROM rollouts r WHERE r.rollout_id = ANY($1::text[])",
        list(set(rollout_ids)),
    )
    return {row[0]: rollout_from_row(row) for row in rows}


async def get_worker(conn: Any, worker_id: str) -> Worker | None:
    """The worker with this id, or None."""
    row = await conn.fetchrow(f"SELECT {WORKER_COLUMNS} FROM workers WHERE worker_id = $1::text", worker_id)
    return None if row is None else worker_from_row(row)


async def query_workers(
    conn: Any,
    normalized: logic.NormalizedFilter,
    sort_by: str | None,
    sort_order: str,
    limit: int,
    offset: int,
) -> PaginatedResult[Worker]:
    """Workers matching `normalized`, sorted and paged."""
    params: list[Any] = []
    condition = where(normalized, WORKER_SQL, params)
    order = order_by(sort_by, sort_order, Worker, WORKER_SQL, "ord")
    count_params = list(params)
    page = limit_clause(limit, offset, params)
    rows = await conn.fetch(
        f"SELECT {WORKER_COLUMNS} FROM workers WHERE {condition} ORDER BY {order} {page}", *params
    )
    total = page_total(rows, limit, offset)
    if total is None:
        total = await conn.fetchval(f"SELECT count(*) FROM workers WHERE {condition}", *count_params)
    return PaginatedResult(items=[worker_from_row(r) for r in rows], limit=limit, offset=offset, total=total)


async def counts(conn: Any) -> tuple[int, int, int, int, int, int]:
    """Rollouts, attempts, spans, resources, workers and the schema's size on disk in bytes."""
    row = await conn.fetchrow(
        "SELECT (SELECT count(*) FROM rollouts), (SELECT count(*) FROM attempts), "
        "(SELECT count(*) FROM spans), "
        "(SELECT count(*) FROM resources), (SELECT count(*) FROM workers), "
        "(SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r')"
    )
    return tuple(int(v or 0) for v in row)  # type: ignore[return-value]
