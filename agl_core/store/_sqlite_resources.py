"""Transaction bodies of `SqliteLightningStore` for resources snapshots.

Like `agl_core.store._sqlite_ops`, every function runs on the store's thread inside the executor's
transaction and takes the `SqliteOps` whose cursor and clock it uses. The latest snapshot's id is kept
in the ``meta`` table, so every process sees the same "latest".
"""

from __future__ import annotations

from agl_core.store import logic
from agl_core.store._sqlite_codec import RESOURCES_COLUMNS, resources_from_row
from agl_core.store._sqlite_ops import RowExists, SqliteOps
from agl_core.store._sqlite_query import Column, order_by, page_total, where
from agl_core.types import PaginatedResult, ResourcesUpdate

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
