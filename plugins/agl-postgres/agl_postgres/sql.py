"""Small builders for the store's SQL: numbered parameters and the worker upsert."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["WORKER_TYPES", "Params", "SqlExpr", "worker_upsert"]

WORKER_TYPES: dict[str, str] = {
    "status": "text",
    "heartbeat_stats": "text",
    "last_heartbeat_time": "float8",
    "last_dequeue_time": "float8",
    "last_busy_time": "float8",
    "last_idle_time": "float8",
    "current_rollout_id": "text",
    "current_attempt_id": "text",
}
"""SQL type of every worker column a `logic.worker_updates_*` dict may name."""


class SqlExpr(str):
    """A SQL expression to inline in a statement instead of binding a value."""


class Params:
    """The values of one statement; `add` returns the typed placeholder (``$3::text``) of a new one."""

    __slots__ = ("values",)

    def __init__(self, *values: Any) -> None:
        self.values: list[Any] = list(values)

    def add(self, value: Any, cast: str) -> str:
        """Append `value`; return its placeholder cast to `cast`."""
        self.values.append(value)
        return f"${len(self.values)}::{cast}"


def worker_upsert(
    params: Params, worker_id: str, updates: Mapping[str, Any], *, when: str | None = None
) -> str:
    """``INSERT ... ON CONFLICT DO UPDATE`` of a worker with `updates` (encoded), values into `params`.

    `when` (a SQL condition, e.g. ``EXISTS (SELECT 1 FROM g)``) makes the write conditional, for use
    inside a data-modifying CTE. `worker_id` may be a `SqlExpr` (the worker an updated row names).
    """
    columns = ["worker_id", *updates]
    slots = [worker_id if isinstance(worker_id, SqlExpr) else params.add(worker_id, "text")]
    slots.extend(
        value if isinstance(value, SqlExpr) else params.add(value, WORKER_TYPES[key])
        for key, value in updates.items()
    )
    assignments = ", ".join(f"{key} = EXCLUDED.{key}" for key in updates)
    conflict = f"DO UPDATE SET {assignments}" if updates else "DO NOTHING"
    source = f"SELECT {', '.join(slots)}" + (f" WHERE {when}" if when else "")
    return f"INSERT INTO workers ({', '.join(columns)}) {source} ON CONFLICT (worker_id) {conflict}"
