"""Spans and span sequence ids of `PostgresLightningStore`.

Adding spans is one transaction that locks the touched rollouts in a fixed order. Sequence ids come
from per-rollout counter rows, raised with row-level upserts (never a table lock), and always above
every stored span's id.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agl_core.store import AttemptNotFoundError, RolloutNotFoundError, logic
from agl_core.types import PaginatedResult, Span
from agl_core.types.tracer import STORED_SPAN_CONTEXT
from agl_postgres.query import Column, limit_clause, order_by, page_total, where

__all__ = [
    "SPAN_SQL",
    "add_spans",
    "next_sequence_id",
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

_SPAN_INSERT_COLUMNS = (
    "rollout_id, attempt_id, span_id, sequence_id, trace_id, parent_id, name, start_time, end_time, data"
)


def _span_row(span: Span, data: str) -> tuple[Any, ...]:
    return (
        span.rollout_id,
        span.attempt_id,
        span.span_id,
        span.sequence_id,
        span.trace_id,
        span.parent_id,
        span.name,
        span.start_time,
        span.end_time,
        data,
    )


_LOCK_ROLLOUTS = (
    "SELECT rollout_id, ord, status, latest_attempt_id FROM rollouts WHERE rollout_id = ANY($1::text[]) "
    "ORDER BY ord FOR UPDATE"
)
_ATTEMPT_STATUSES = (
    "SELECT a.rollout_id, a.attempt_id, a.status FROM attempts a "
    "JOIN unnest($1::text[], $2::text[]) AS k(rollout_id, attempt_id) "
    "ON a.rollout_id = k.rollout_id AND a.attempt_id = k.attempt_id"
)
_INSERT_SPANS = f"""
INSERT INTO spans ({_SPAN_INSERT_COLUMNS})
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[],
                     $8::float8[], $9::float8[], $10::text[])
ON CONFLICT (rollout_id, attempt_id, span_id) DO NOTHING
RETURNING rollout_id, attempt_id, span_id
"""
_TOUCH = """
WITH ta AS (
    UPDATE attempts a SET last_heartbeat_time = $1::float8, status = u.status,
        end_time = CASE WHEN u.changed THEN u.end_time ELSE a.end_time END
    FROM unnest($2::text[], $3::text[], $4::text[], $5::bool[], $6::float8[])
        AS u(rollout_id, attempt_id, status, changed, end_time)
    WHERE a.rollout_id = u.rollout_id AND a.attempt_id = u.attempt_id
), tr AS (
    UPDATE rollouts r SET rev = r.rev + 1, status = coalesce(u.status, r.status),
        end_time = CASE WHEN u.status IS NULL THEN r.end_time ELSE u.end_time END,
        queue_pos = CASE WHEN u.status IS NULL THEN r.queue_pos ELSE NULL END
    FROM unnest($7::bigint[], $8::text[], $9::float8[]) AS u(ord, status, end_time)
    WHERE r.ord = u.ord
)
SELECT 1
"""
"""A span batch's heartbeats in one statement: its attempts, then its rollouts (``rev``, status moves)."""


async def add_spans(
    conn: Any, spans: Sequence[Span], to_json: Callable[[Span], str], now: float, retrying: bool
) -> list[Span]:
    """Insert validated spans in one transaction; return those inserted (duplicates skipped), in order.

    Every span's rollout and attempt must exist (checked under lock, before anything is written); each
    attempt that received a span gets one heartbeat. Spans with ``sequence_id`` 0 get ids issued in the
    same transaction (`sequence_ids`). On a retry after a lost acknowledgement, spans already stored
    count as inserted (the earlier try committed the whole batch or nothing).
    """
    async with conn.transaction():
        rollout_ids = list(dict.fromkeys(span.rollout_id for span in spans))
        locked = {row[0]: row for row in await conn.fetch(_LOCK_ROLLOUTS, rollout_ids)}
        for rid in rollout_ids:
            if rid not in locked:
                raise RolloutNotFoundError(rid)
        pairs = list(dict.fromkeys((span.rollout_id, span.attempt_id) for span in spans))
        found = {
            (row[0], row[1]): row[2]
            for row in await conn.fetch(_ATTEMPT_STATUSES, [p[0] for p in pairs], [p[1] for p in pairs])
        }
        for pair in pairs:
            if pair not in found:
                raise AttemptNotFoundError(*pair)
        unnumbered = [index for index, span in enumerate(spans) if not span.sequence_id]
        if unnumbered:
            spans = list(spans)
            issued = await sequence_ids(conn, [spans[index].rollout_id for index in unnumbered])
            for index, sequence_id in zip(unnumbered, issued, strict=True):
                spans[index] = logic.number_span(spans[index], sequence_id)
        rows = [_span_row(span, to_json(span)) for span in spans]
        columns = [list(column) for column in zip(*rows, strict=True)]
        stored = {(r[0], r[1], r[2]) for r in await conn.fetch(_INSERT_SPANS, *columns)}
        inserted: list[Span] = []
        seen: set[tuple[str, str, str]] = set()
        for span in spans:
            key = (span.rollout_id, span.attempt_id, span.span_id)
            if key in seen:
                continue
            seen.add(key)
            if key in stored or retrying:
                inserted.append(span)
        touched = {
            (span.rollout_id, span.attempt_id)
            for span in inserted
            if (span.rollout_id, span.attempt_id, span.span_id) in stored
        }
        if not touched:
            return inserted
        attempt_cols: list[list[Any]] = [[], [], [], [], []]
        rollout_moves: dict[str, tuple[str | None, float | None]] = {}
        for rid, aid in pairs:
            if (rid, aid) not in touched:
                continue
            _, _, r_status, latest_id = locked[rid]
            a_status = found[(rid, aid)]
            current = rollout_moves.get(rid, (None, None))[0] or r_status
            new_attempt, new_rollout = logic.heartbeat_transition(
                current, a_status, is_latest=aid == latest_id
            )
            for column, value in zip(
                attempt_cols,
                (
                    rid,
                    aid,
                    new_attempt,
                    new_attempt != a_status,
                    logic.attempt_end_time_for(new_attempt, now),
                ),
                strict=True,
            ):
                column.append(value)
            if new_rollout is not None:
                rollout_moves[rid] = (new_rollout, logic.rollout_end_time_for(new_rollout, now))
            else:
                rollout_moves.setdefault(rid, (None, None))
        ords = [locked[rid][1] for rid in rollout_moves]
        await conn.execute(
            _TOUCH,
            now,
            *attempt_cols,
            ords,
            [m[0] for m in rollout_moves.values()],
            [m[1] for m in rollout_moves.values()],
        )
    return inserted


# ---------------------------------------------------------------------------------------------- sequence ids

_NEXT_ID = """
INSERT INTO span_counters AS c (rollout_id, value, step)
VALUES ($1::text, coalesce((SELECT max(sequence_id) FROM spans WHERE rollout_id = $1::text), 0) + 1, 1)
ON CONFLICT (rollout_id) DO UPDATE SET value = greatest(c.value + 1, EXCLUDED.value), step = 1
RETURNING value
"""
_NEXT_IDS = """
INSERT INTO span_counters AS c (rollout_id, value, step)
SELECT u.rollout_id,
    coalesce((SELECT max(sequence_id) FROM spans s WHERE s.rollout_id = u.rollout_id), 0) + u.n, u.n
FROM unnest($1::text[], $2::int[]) AS u(rollout_id, n) ORDER BY u.rollout_id
ON CONFLICT (rollout_id) DO UPDATE
    SET value = greatest(c.value + EXCLUDED.step, EXCLUDED.value), step = EXCLUDED.step
RETURNING rollout_id, value
"""


async def next_sequence_id(conn: Any, rollout_id: str) -> int:
    """Issue the next sequence id of `rollout_id` (one upsert of its counter row)."""
    return int(await conn.fetchval(_NEXT_ID, rollout_id))


async def sequence_ids(conn: Any, rollout_ids: Sequence[str]) -> list[int]:
    """Issue one sequence id per entry of `rollout_ids`, consecutive per rollout in input order."""
    counts: dict[str, int] = {}
    for rid in rollout_ids:
        counts[rid] = counts.get(rid, 0) + 1
    rows = await conn.fetch(_NEXT_IDS, list(counts), list(counts.values()))
    next_id = {row[0]: int(row[1]) - counts[row[0]] + 1 for row in rows}
    issued = []
    for rid in rollout_ids:
        issued.append(next_id[rid])
        next_id[rid] += 1
    return issued


# ---------------------------------------------------------------------------------------------- queries


async def query_spans(
    conn: Any,
    rollout_id: str,
    attempt_id: str | None,
    normalized: logic.NormalizedFilter,
    sort_by: str | None,
    sort_order: str,
    limit: int,
    offset: int,
) -> PaginatedResult[Span]:
    """Spans of one rollout (through its index), filtered, sorted and paged."""
    if attempt_id == "latest":
        latest = await conn.fetchval(
            "SELECT latest_attempt_id FROM rollouts WHERE rollout_id = $1::text", rollout_id
        )
        if latest is None:
            return PaginatedResult(items=[], limit=limit, offset=offset, total=0)
        normalized = logic.NormalizedFilter(
            normalized.conditions,
            (*normalized.must, logic.FilterCondition("attempt_id", "exact", latest)),
            normalized.aggregate,
        )
    params: list[Any] = []
    condition = where(normalized, SPAN_SQL, params)
    order = order_by(sort_by, sort_order, Span, SPAN_SQL, "ord")
    count_params = list(params)
    page = limit_clause(limit, offset, params)
    rows = await conn.fetch(f"SELECT data FROM spans WHERE {condition} ORDER BY {order} {page}", *params)
    items = [Span.model_validate_json(row[0], context=STORED_SPAN_CONTEXT) for row in rows]
    total = page_total(items, limit, offset)
    if total is None:
        total = await conn.fetchval(f"SELECT count(*) FROM spans WHERE {condition}", *count_params)
    return PaginatedResult(items=items, limit=limit, offset=offset, total=total)
