"""Transaction bodies of `SqliteLightningStore` for spans and span sequence ids.

Like `agl_core.store._sqlite_ops`, every function runs on the store's thread inside the executor's
transaction and takes the `SqliteOps` whose cursor and clock it uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agl_core.store import logic
from agl_core.store._sqlite_ops import SqliteOps
from agl_core.store._sqlite_query import Column, order_by, page_total, where
from agl_core.store.errors import AttemptNotFoundError, RolloutNotFoundError
from agl_core.types import PaginatedResult, Span
from agl_core.types.tracer import STORED_SPAN_CONTEXT

__all__ = [
    "SPAN_SQL",
    "add_spans",
    "query_spans",
    "sequence_ids",
]

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
