"""Resources snapshots of `PostgresLightningStore`; the latest id lives in ``meta`` (shared by all)."""

from __future__ import annotations

from typing import Any

import asyncpg

from agl_core.store import logic
from agl_core.types import PaginatedResult, ResourcesUpdate
from agl_postgres.codec import RESOURCES_COLUMNS, resources_from_row
from agl_postgres.query import Column, limit_clause, order_by, page_total, where

__all__ = [
    "RESOURCES_SQL",
    "add_resources",
    "get_latest_resources",
    "get_resources",
    "query_resources",
    "update_resources",
]

RESOURCES_SQL: dict[str, Column] = {
    "resources_id": Column("resources_id", True),
    "create_time": Column("create_time", False),
    "update_time": Column("update_time", False),
    "version": Column("version", False),
}
"""Resources fields that can be filtered or sorted in SQL."""

_SET_LATEST = (
    "latest AS (INSERT INTO meta (key, value) SELECT 'latest_resources_id', resources_id FROM w "
    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value)"
)


async def add_resources(
    conn: Any, resources_id: str, resources_json: str, now: float, retrying: bool
) -> ResourcesUpdate:
    """Store a new snapshot at version 1 (one statement, which also makes it the latest)."""
    while True:
        try:
            row = await conn.fetchrow(
                f"""WITH w AS (
                    INSERT INTO resources (resources_id, create_time, update_time, version, resources)
                    VALUES ($1::text, $2::float8, $2::float8, 1, $3::text) RETURNING {RESOURCES_COLUMNS}
                ), {_SET_LATEST}
                SELECT * FROM w""",
                resources_id,
                now,
                resources_json,
            )
            return resources_from_row(row)
        except asyncpg.exceptions.UniqueViolationError:
            if retrying:  # the earlier try stored it and lost the answer
                found = await get_resources(conn, resources_id)
                if found is not None:
                    return found
            resources_id = logic.new_resources_id()


async def update_resources(conn: Any, resources_id: str, resources_json: str, now: float) -> ResourcesUpdate:
    """Upsert: version 1 for an unknown id, else version + 1 and a new update time; becomes the latest."""
    row = await conn.fetchrow(
        f"""WITH w AS (
            INSERT INTO resources AS r (resources_id, create_time, update_time, version, resources)
            VALUES ($1::text, $2::float8, $2::float8, 1, $3::text)
            ON CONFLICT (resources_id) DO UPDATE
                SET update_time = EXCLUDED.update_time, version = r.version + 1,
                    resources = EXCLUDED.resources
            RETURNING {RESOURCES_COLUMNS}
        ), {_SET_LATEST}
        SELECT * FROM w""",
        resources_id,
        now,
        resources_json,
    )
    return resources_from_row(row)


async def get_resources(conn: Any, resources_id: str) -> ResourcesUpdate | None:
    """The snapshot with this id, or None."""
    row = await conn.fetchrow(
        f"SELECT {RESOURCES_COLUMNS} FROM resources WHERE resources_id = $1::text", resources_id
    )
    return None if row is None else resources_from_row(row)


async def get_latest_resources(conn: Any) -> ResourcesUpdate | None:
    """The most recently added or updated snapshot, or None."""
    row = await conn.fetchrow(
        f"SELECT {RESOURCES_COLUMNS} FROM resources WHERE resources_id = "
        "(SELECT value FROM meta WHERE key = 'latest_resources_id')"
    )
    return None if row is None else resources_from_row(row)


async def query_resources(
    conn: Any,
    normalized: logic.NormalizedFilter,
    sort_by: str | None,
    sort_order: str,
    limit: int,
    offset: int,
) -> PaginatedResult[ResourcesUpdate]:
    """Snapshots matching `normalized`, sorted and paged (insertion order by default)."""
    params: list[Any] = []
    condition = where(normalized, RESOURCES_SQL, params)
    order = order_by(sort_by, sort_order, ResourcesUpdate, RESOURCES_SQL, "ord")
    count_params = list(params)
    page = limit_clause(limit, offset, params)
    rows = await conn.fetch(
        f"SELECT {RESOURCES_COLUMNS} FROM resources WHERE {condition} ORDER BY {order} {page}", *params
    )
    total = page_total(rows, limit, offset)
    if total is None:
        total = await conn.fetchval(f"SELECT count(*) FROM resources WHERE {condition}", *count_params)
    return PaginatedResult(
        items=[resources_from_row(r) for r in rows], limit=limit, offset=offset, total=total
    )
