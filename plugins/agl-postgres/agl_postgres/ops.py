"""Rollouts, attempts, the queue, workers and the watchdog of `PostgresLightningStore`, as SQL calls.

Each function runs on one pooled connection (`agl_postgres.connection`) and makes each state change
with **one statement** where it can, which PostgreSQL applies atomically:

- enqueue: one ``INSERT ... SELECT FROM unnest(...)`` for the whole batch (queue positions from a
  sequence: no table lock);
- claim: one statement that takes the queue head with ``FOR UPDATE SKIP LOCKED``, moves the rollouts
  to ``preparing`` and inserts their attempts (any number of processes never claim a rollout twice);
- attempt and rollout changes that depend on the current state (`agl_core.store.logic` decides) read
  the state, then write it with one compare-and-set statement guarded by the rollout's ``rev``; if
  another writer got there first the call re-reads and decides again. An attempt status whose effect
  on the rollout needs no retry decision (``succeeded``, ``running``, ``preparing``) is read, decided
  and written in one statement: `logic`'s answer for every rollout status is passed along as a table
  (`status_decision`), still under the ``rev`` the statement read. The watchdog writes each flag
  under the ``rev`` it read, so several stores scanning at once flag an attempt once.

Worker bookkeeping rides in the same statement as the attempt write it follows.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

import asyncpg
from pydantic_core import from_json

from agl_core.store import UNSET, AttemptNotFoundError, RolloutNotFoundError, Unset, logic
from agl_core.types import Attempt, AttemptedRollout, Rollout, RolloutConfig, Worker
from agl_core.types.status import ATTEMPT_STATUSES, ROLLOUT_STATUSES
from agl_postgres.codec import (
    ATTEMPT_COLUMNS,
    ROLLOUT_COLUMNS,
    WORKER_COLUMNS,
    attempt_from_row,
    attempt_values,
    config_from_json,
    construct,
    rollout_from_row,
    worker_from_row,
)
from agl_postgres.sql import Params, SqlExpr, worker_upsert

__all__ = [
    "NewRollout",
    "dequeue",
    "enqueue",
    "scan",
    "start_attempt",
    "start_rollout",
    "update_attempt",
    "update_rollout",
    "update_worker",
]

_ID_TRIES = 64
_LATEST_RESOURCES = "(SELECT value FROM meta WHERE key = 'latest_resources_id')"


class NewRollout(NamedTuple):
    """A validated rollout to create (JSON already encoded)."""

    input_json: str
    mode: str | None
    resources_id: str | None
    config_json: str
    timeout_seconds: float | None
    unresponsive_seconds: float | None
    metadata_json: str | None


def _rollout(item: NewRollout, rollout_id: str, resources_id: str | None, status: str, now: float) -> Rollout:
    return rollout_from_row(
        (
            rollout_id,
            item.input_json,
            now,
            None,
            item.mode,
            resources_id,
            status,
            item.config_json,
            item.metadata_json,
        )
    )


def _new_attempt(
    rollout_id: str, attempt_id: str, sequence_id: int, now: float, worker_id: str | None
) -> Attempt:
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


def _with_attempt(rollout: Rollout, attempt: Attempt) -> AttemptedRollout:
    values = dict(rollout.__dict__)
    values["attempt"] = attempt
    return construct(AttemptedRollout, values)


# ---------------------------------------------------------------------------------------------- creating

_ENQUEUE = f"""
INSERT INTO rollouts (rollout_id, status, start_time, mode, resources_id, input, config,
                                      metadata,
                      queue_pos, timeout_seconds, unresponsive_seconds)
SELECT u.rollout_id, 'queuing', $1::float8, u.mode, coalesce(u.resources_id, {_LATEST_RESOURCES}),
       u.input, u.config, u.metadata, nextval('queue_positions'), u.timeout_seconds, u.unresponsive_seconds
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
            $8::float8[], $9::float8[])
     WITH ORDINALITY AS u(rollout_id, mode, resources_id, input, config, metadata, timeout_seconds,
                          unresponsive_seconds, n)
ORDER BY u.n
ON CONFLICT (rollout_id) DO NOTHING
RETURNING rollout_id, resources_id
"""


async def enqueue(
    conn: Any, items: Sequence[NewRollout], ids: list[str], now: float, retrying: bool
) -> list[Rollout]:
    """Insert `items` as ``queuing`` rollouts at the queue's tail under `ids` (redrawn on collision).

    `ids` is updated in place, so a retried call reuses them: if they are all stored, the earlier try
    was committed and its rollouts are returned.
    """
    resources: dict[str, str | None] = {}
    if retrying:
        rows = await conn.fetch(
            "SELECT rollout_id, resources_id FROM rollouts WHERE rollout_id = ANY($1::text[])", ids
        )
        if len(rows) == len(ids):
            resources = {row[0]: row[1] for row in rows}
            return [
                _rollout(item, rid, resources[rid], "queuing", now)
                for item, rid in zip(items, ids, strict=True)
            ]
    if len(items) == 1:
        return [await _enqueue_one(conn, items[0], ids, now)]
    pending = list(range(len(items)))
    for _ in range(_ID_TRIES):
        batch = [items[i] for i in pending]
        rows = await conn.fetch(
            _ENQUEUE,
            now,
            [ids[i] for i in pending],
            [it.mode for it in batch],
            [it.resources_id for it in batch],
            [it.input_json for it in batch],
            [it.config_json for it in batch],
            [it.metadata_json for it in batch],
            [it.timeout_seconds for it in batch],
            [it.unresponsive_seconds for it in batch],
        )
        for row in rows:
            resources[row[0]] = row[1]
        pending = [i for i in pending if ids[i] not in resources]
        if not pending:
            return [
                _rollout(item, rid, resources[rid], "queuing", now)
                for item, rid in zip(items, ids, strict=True)
            ]
        for i in pending:
            ids[i] = logic.new_rollout_id()
    raise RuntimeError(f"Could not draw an unused rollout id after {_ID_TRIES} tries.")


_ENQUEUE_ONE = f"""
INSERT INTO rollouts (rollout_id, status, start_time, mode, resources_id, input, config, metadata,
                      queue_pos, timeout_seconds, unresponsive_seconds)
VALUES ($1::text, 'queuing', $2::float8, $3::text, coalesce($4::text, {_LATEST_RESOURCES}), $5::text,
        $6::text, $7::text, nextval('queue_positions'), $8::float8, $9::float8)
RETURNING resources_id
"""
"""`_ENQUEUE` for one rollout: scalar parameters, and a taken id fails the statement (no upsert)."""


async def _enqueue_one(conn: Any, item: NewRollout, ids: list[str], now: float) -> Rollout:
    for _ in range(_ID_TRIES):
        try:
            resources_id = await conn.fetchval(
                _ENQUEUE_ONE,
                ids[0],
                now,
                item.mode,
                item.resources_id,
                item.input_json,
                item.config_json,
                item.metadata_json,
                item.timeout_seconds,
                item.unresponsive_seconds,
            )
        except asyncpg.exceptions.UniqueViolationError:
            ids[0] = logic.new_rollout_id()
            continue
        return _rollout(item, ids[0], resources_id, "queuing", now)
    raise RuntimeError(f"Could not draw an unused rollout id after {_ID_TRIES} tries.")


async def start_rollout(
    conn: Any, item: NewRollout, ids: list[str], worker_id: str | None, now: float, retrying: bool
) -> AttemptedRollout:
    """Create a ``preparing`` rollout with attempt #1 in one statement (``ids``: rollout id, attempt id)."""
    if retrying:
        from agl_postgres.reads import get_rollout

        existing = await get_rollout(conn, ids[0])
        if existing is not None:
            return existing  # type: ignore[return-value]
    for _ in range(_ID_TRIES):
        rollout_id, attempt_id = ids
        params = Params(
            rollout_id,
            now,
            item.mode,
            item.resources_id,
            item.input_json,
            item.config_json,
            item.metadata_json,
            attempt_id,
            item.timeout_seconds,
            item.unresponsive_seconds,
            worker_id,
        )
        worker = ""
        if worker_id:
            updates = logic.worker_updates_for_attempt("preparing", rollout_id, attempt_id, now)
            worker = f", w AS ({worker_upsert(params, worker_id, updates, when='EXISTS (SELECT 1 FROM r)')})"
        row = await conn.fetchrow(
            f"""WITH r AS (
                INSERT INTO rollouts (rollout_id, status, start_time, mode, resources_id, input, config,
                    metadata, attempt_count, latest_attempt_id, timeout_seconds, unresponsive_seconds)
                VALUES ($1::text, 'preparing', $2::float8, $3::text, coalesce($4::text, {_LATEST_RESOURCES}),
                        $5::text, $6::text, $7::text, 1, $8::text, $9::float8, $10::float8)
                ON CONFLICT (rollout_id) DO NOTHING RETURNING rollout_id, resources_id
            ), a AS (
                INSERT INTO attempts (rollout_id, attempt_id, sequence_id, status, start_time, worker_id)
                SELECT rollout_id, $8::text, 1, 'preparing', $2::float8, $11::text FROM r
            ){worker}
            SELECT resources_id FROM r""",
            *params.values,
        )
        if row is not None:
            rollout = _rollout(item, rollout_id, row[0], "preparing", now)
            return _with_attempt(rollout, _new_attempt(rollout_id, attempt_id, 1, now, worker_id))
        ids[0] = logic.new_rollout_id()
    raise RuntimeError(f"Could not draw an unused rollout id after {_ID_TRIES} tries.")


# ---------------------------------------------------------------------------------------------- claiming

_CLAIM_TEMPLATE = f"""
WITH head AS (
    SELECT ord, queue_pos FROM rollouts
    WHERE queue_pos IS NOT NULL AND status IN ('queuing', 'requeuing')
    ORDER BY queue_pos LIMIT $1::int FOR UPDATE SKIP LOCKED
), numbered AS (
    SELECT ord, row_number() OVER (ORDER BY queue_pos) AS n FROM head
), claimed AS (
    UPDATE rollouts r SET status = 'preparing', end_time = NULL, queue_pos = NULL, rev = r.rev + 1,
        attempt_count = r.attempt_count + 1, latest_attempt_id = ($2::text[])[numbered.n]
    FROM numbered WHERE r.ord = numbered.ord
    RETURNING numbered.n, r.attempt_count, {ROLLOUT_COLUMNS}
), inserted AS (
    INSERT INTO attempts (rollout_id, attempt_id, sequence_id, status, start_time, worker_id, claim_token)
    SELECT rollout_id, ($2::text[])[n], attempt_count, 'preparing', $3::float8, $4::text, $5::text
    FROM claimed
)
{{worker}}
SELECT * FROM claimed ORDER BY n
"""

_CLAIM = _CLAIM_TEMPLATE.format(worker="")
"""The claim statement without worker bookkeeping."""
_LAST_CLAIMED_ROLLOUT = SqlExpr("(SELECT rollout_id FROM claimed ORDER BY n DESC LIMIT 1)")
_LAST_CLAIMED_ATTEMPT = SqlExpr("(SELECT ($2::text[])[n] FROM claimed ORDER BY n DESC LIMIT 1)")

_CLAIMED_BY_TOKEN = f"""
SELECT 0, a.sequence_id, {ROLLOUT_COLUMNS}, a.attempt_id FROM attempts a
JOIN rollouts r ON r.rollout_id = a.rollout_id WHERE a.claim_token = $1::text ORDER BY a.start_time
"""


def _claimed(row: Sequence[Any], attempt_id: str, now: float, worker_id: str | None) -> AttemptedRollout:
    """A claimed row (``n, attempt_count, ROLLOUT_COLUMNS``): the rollout, now preparing, with its attempt."""
    rollout = rollout_from_row(row, offset=2)
    values = dict(rollout.__dict__)
    values["status"] = "preparing"
    values["end_time"] = None
    values["attempt"] = _new_attempt(values["rollout_id"], attempt_id, row[1], now, worker_id)
    return construct(AttemptedRollout, values)


async def dequeue(
    conn: Any, limit: int, worker_id: str | None, token: str, now: float, retrying: bool
) -> list[AttemptedRollout]:
    """Claim up to `limit` queued rollouts (FIFO), then book the worker (see `LightningStore`)."""
    claimed: list[AttemptedRollout] = []
    if retrying:  # the earlier try may have claimed and lost its answer: its attempts carry the token
        rows = await conn.fetch(_CLAIMED_BY_TOKEN, token)
        claimed = [_claimed(row, row[11], now, worker_id) for row in rows]
    if not claimed:
        for _ in range(_ID_TRIES):
            attempt_ids = [logic.new_attempt_id() for _ in range(limit)]
            sql, params = _CLAIM, Params(limit, attempt_ids, now, worker_id, token)
            if worker_id:  # the worker becomes busy with the last claim, in the same statement
                marks = logic.worker_updates_for_attempt("preparing", "\x00r", "\x00a", now, dequeue=True)
                exprs = {"\x00r": _LAST_CLAIMED_ROLLOUT, "\x00a": _LAST_CLAIMED_ATTEMPT}
                updates = {k: exprs.get(v, v) if isinstance(v, str) else v for k, v in marks.items()}
                upsert = worker_upsert(params, worker_id, updates, when="EXISTS (SELECT 1 FROM claimed)")
                sql = _CLAIM_TEMPLATE.format(worker=f", w AS ({upsert})")
            try:
                rows = await conn.fetch(sql, *params.values)
            except asyncpg.exceptions.UniqueViolationError:
                continue  # a new attempt id repeated an older attempt's id of the same rollout
            claimed = [_claimed(row, attempt_ids[row[0] - 1], now, worker_id) for row in rows]
            break
        else:
            raise RuntimeError(f"Could not draw unused attempt ids after {_ID_TRIES} tries.")
    if worker_id and (retrying or not claimed):
        if claimed:
            last = claimed[-1]
            updates = logic.worker_updates_for_attempt(
                "preparing", last.rollout_id, last.attempt.attempt_id, now, dequeue=True
            )
        else:
            current = await conn.fetchval("SELECT status FROM workers WHERE worker_id = $1::text", worker_id)
            updates = logic.worker_updates_for_empty_dequeue(current, now)
        params = Params()
        await conn.execute(worker_upsert(params, worker_id, updates), *params.values)
    return claimed


# ---------------------------------------------------------------------------------------------- attempts

_STATE_COLUMNS = (
    f"r.ord, r.rev, r.status, r.config, r.latest_attempt_id, r.queue_pos IS NOT NULL, {ATTEMPT_COLUMNS}"
)
"""A rollout's state for a decision: ord, rev, status, config, latest attempt id, queued, then the attempt."""
_STATE_ATTEMPT = 6
_ATTEMPT_STATE = (
    f"SELECT {_STATE_COLUMNS} FROM rollouts r LEFT JOIN attempts a "
    "ON a.rollout_id = r.rollout_id AND a.attempt_id = coalesce($2::text, r.latest_attempt_id) "
    "WHERE r.rollout_id = $1::text"
)
_UNHEALTHY = (
    f"SELECT {_STATE_COLUMNS} FROM rollouts r JOIN attempts a "
    "ON a.rollout_id = r.rollout_id AND a.attempt_id = r.latest_attempt_id "
    # the first two terms repeat the condition of the rollouts_watched partial index, so it is used
    "WHERE r.status IN ('preparing', 'running') "
    "AND (r.timeout_seconds IS NOT NULL OR r.unresponsive_seconds IS NOT NULL) "
    "AND a.status IN ('preparing', 'running') "
    "AND ((r.timeout_seconds IS NOT NULL AND $1::float8 - a.start_time > r.timeout_seconds) "
    "OR (r.unresponsive_seconds IS NOT NULL "
    "AND $1::float8 - coalesce(a.last_heartbeat_time, a.start_time) > r.unresponsive_seconds))"
)
_ATTEMPT_TYPES = {
    "status": "text",
    "end_time": "float8",
    "worker_id": "text",
    "last_heartbeat_time": "float8",
    "metadata": "text",
}


def rollout_status_sql(params: Params, status: str, now: float) -> str:
    """SET assignments writing a rollout `status` with its end time and queue place (and ``rev``)."""
    end_time = logic.rollout_end_time_for(status, now)
    queue = "coalesce(queue_pos, nextval('queue_positions'))" if logic.should_enqueue(status) else "NULL"
    status_slot, end_slot = params.add(status, "text"), params.add(end_time, "float8")
    return f"status = {status_slot}, end_time = {end_slot}, queue_pos = {queue}"


async def _write_attempt(
    conn: Any,
    state: Sequence[Any],
    status: Any,
    worker_id: Any,
    last_heartbeat_time: Any,
    metadata_json: Any,
    now: float,
) -> Attempt | None:
    """Apply an attempt update decided from `state` (`_STATE_COLUMNS`); None if `state` is outdated."""
    ord_, rev, rollout_status, config_json, latest_id = state[:5]
    values = attempt_values(state, _STATE_ATTEMPT)
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
    values.update(changes)
    if metadata_json is not UNSET:
        values["metadata"] = None if metadata_json is None else from_json(metadata_json)
    updated = construct(Attempt, values)
    if not changes:
        return updated
    params = Params(ord_, rev, updated.rollout_id, updated.attempt_id)
    rollout_set = ""
    if status is not UNSET:
        new_status = logic.next_rollout_status(
            rollout_status,
            config_from_json(config_json),
            updated.sequence_id,
            status,
            is_latest=updated.attempt_id == latest_id,
        )
        if new_status is not None:
            rollout_set = ", " + rollout_status_sql(params, new_status, now)
    assignments = ", ".join(
        f"{key} = {params.add(value, _ATTEMPT_TYPES[key])}" for key, value in changes.items()
    )
    worker = ""
    if logic.worker_sync_required(worker_id, status, updated.worker_id) and updated.worker_id:
        updates = logic.worker_updates_for_attempt(
            updated.status, updated.rollout_id, updated.attempt_id, now
        )
        worker = (
            f", w AS ({worker_upsert(params, updated.worker_id, updates, when='EXISTS (SELECT 1 FROM g)')})"
        )
    written = await conn.fetchval(
        f"""WITH g AS (
            UPDATE rollouts SET rev = rev + 1{rollout_set}
            WHERE ord = $1::bigint AND rev = $2::bigint RETURNING ord
        ), a AS (
            UPDATE attempts SET {assignments}
            WHERE rollout_id = $3::text AND attempt_id = $4::text AND EXISTS (SELECT 1 FROM g)
        ){worker}
        SELECT count(*) FROM g""",
        *params.values,
    )
    return updated if written else None


_PROBES = (
    (RolloutConfig(), 1),
    (RolloutConfig(max_attempts=1000, retry_condition=list(ATTEMPT_STATUSES)), 1),
    (RolloutConfig(max_attempts=1000, retry_condition=list(ATTEMPT_STATUSES)), 1000),
)
_decisions: dict[str, tuple[list[str | None], list[bool]] | None] = {}


def status_decision(status: str) -> tuple[list[str | None], list[bool]] | None:
    """How an attempt moving to `status` moves its rollout, for a one-statement update.

    ``(next, queued)``: entry ``2 * i + is_latest`` is `logic.next_rollout_status` for the rollout in
    ``ROLLOUT_STATUSES[i]`` (None: unchanged) and whether that status queues it. None when the
    decision also depends on the rollout's config or the attempt's number (retries), found by asking
    `logic` under configs that allow and forbid a retry.
    """
    if status not in _decisions:
        table: list[str | None] = []
        for rollout_status in ROLLOUT_STATUSES:
            for is_latest in (False, True):
                answers = {
                    logic.next_rollout_status(rollout_status, config, seq, status, is_latest=is_latest)
                    for config, seq in _PROBES
                }
                if len(answers) > 1:
                    _decisions[status] = None
                    return None
                table.append(answers.pop())
        _decisions[status] = (table, [s is not None and logic.should_enqueue(s) for s in table])
    return _decisions[status]


_ROLLOUT_STATUS_ARRAY = "ARRAY[" + ", ".join(f"'{s}'" for s in ROLLOUT_STATUSES) + "]::text[]"
_DECIDED_UPDATE = f"""
WITH d AS (
    SELECT r.ord, r.rev, a.attempt_id,
        2 * array_position({_ROLLOUT_STATUS_ARRAY}, r.status) - 1
            + coalesce(a.attempt_id = r.latest_attempt_id, false)::int AS k
    FROM rollouts r LEFT JOIN attempts a
        ON a.rollout_id = r.rollout_id AND a.attempt_id = coalesce($2::text, r.latest_attempt_id)
    WHERE r.rollout_id = $1::text
), g AS (
    UPDATE rollouts r SET rev = r.rev + 1, status = coalesce(($3::text[])[d.k], r.status),
        end_time = CASE WHEN ($3::text[])[d.k] IS NULL THEN r.end_time ELSE ($4::float8[])[d.k] END,
        queue_pos = CASE WHEN ($3::text[])[d.k] IS NULL THEN r.queue_pos
            WHEN ($5::bool[])[d.k] THEN coalesce(r.queue_pos, nextval('queue_positions')) END
    FROM d WHERE r.ord = d.ord AND r.rev = d.rev AND d.attempt_id IS NOT NULL
    RETURNING r.ord
), u AS (
    UPDATE attempts a SET {{assignments}}
    FROM d WHERE a.rollout_id = $1::text AND a.attempt_id = d.attempt_id AND EXISTS (SELECT 1 FROM g)
    RETURNING {ATTEMPT_COLUMNS}
){{worker}}
SELECT d.attempt_id IS NOT NULL, (SELECT count(*) FROM g), u.* FROM d LEFT JOIN u ON true
"""
"""Read, decide (from a `status_decision` table) and write an attempt update in one statement, under
the ``rev`` it read; ``count(*) FROM g`` is 0 when a concurrent writer got there first."""


async def _update_attempt_decided(
    conn: Any,
    rollout_id: str,
    attempt_id: str,
    decision: tuple[list[str | None], list[bool]],
    status: str,
    worker_id: Any,
    last_heartbeat_time: Any,
    metadata_json: Any,
    now: float,
) -> Attempt:
    """`update_attempt` with a status whose effect on the rollout `status_decision` knows: one round trip."""
    table, queued = decision
    target = None if attempt_id == "latest" else attempt_id
    ends = [None if s is None else logic.rollout_end_time_for(s, now) for s in table]
    params = Params(rollout_id, target, table, ends, queued)
    changes: dict[str, Any] = {"status": status, "end_time": logic.attempt_end_time_for(status, now)}
    if worker_id is not UNSET:
        changes["worker_id"] = worker_id
    if last_heartbeat_time is not UNSET:
        changes["last_heartbeat_time"] = last_heartbeat_time
    if metadata_json is not UNSET:
        changes["metadata"] = metadata_json
    assignments = ", ".join(
        f"{key} = {params.add(value, _ATTEMPT_TYPES[key])}" for key, value in changes.items()
    )
    worker = ""
    if worker_id is UNSET or worker_id:  # the worker the attempt names after the write
        marks = logic.worker_updates_for_attempt(status, rollout_id, "\x00a", now)
        exprs = {"\x00a": SqlExpr("(SELECT attempt_id FROM u)")}
        updates = {k: exprs.get(v, v) if isinstance(v, str) else v for k, v in marks.items()}
        if isinstance(worker_id, Unset):
            upsert = worker_upsert(
                params,
                SqlExpr("(SELECT worker_id FROM u)"),
                updates,
                when="EXISTS (SELECT 1 FROM u WHERE worker_id <> '')",
            )
        else:
            upsert = worker_upsert(params, worker_id, updates, when="EXISTS (SELECT 1 FROM u)")
        worker = f", w AS ({upsert})"
    sql = _DECIDED_UPDATE.format(assignments=assignments, worker=worker)
    while True:
        row = await conn.fetchrow(sql, *params.values)
        if row is None:
            raise RolloutNotFoundError(rollout_id)
        if not row[0]:
            raise AttemptNotFoundError(rollout_id, attempt_id)
        if row[1]:
            return attempt_from_row(row, 2)


async def update_attempt(
    conn: Any,
    rollout_id: str,
    attempt_id: str,
    status: Any,
    worker_id: Any,
    last_heartbeat_time: Any,
    metadata_json: Any,
    now: float,
) -> Attempt:
    """`LightningStore.update_attempt` with checked arguments (`UNSET` leaves a field alone).

    One statement when `status` is given and its effect on the rollout needs no retry decision
    (`status_decision`); otherwise a read, then a compare-and-set write (`_write_attempt`).
    """
    decision = None if status is UNSET else status_decision(status)
    if decision is not None:
        return await _update_attempt_decided(
            conn, rollout_id, attempt_id, decision, status, worker_id, last_heartbeat_time, metadata_json, now
        )
    target = None if attempt_id == "latest" else attempt_id
    while True:
        state = await conn.fetchrow(_ATTEMPT_STATE, rollout_id, target)
        if state is None:
            raise RolloutNotFoundError(rollout_id)
        if state[_STATE_ATTEMPT] is None:
            raise AttemptNotFoundError(rollout_id, attempt_id)
        updated = await _write_attempt(
            conn, state, status, worker_id, last_heartbeat_time, metadata_json, now
        )
        if updated is not None:
            return updated


async def scan(conn: Any, now: float) -> int:
    """Flag timed-out and unresponsive latest attempts (`logic.scan_unhealthy`); return how many.

    Each flag is written under the ``rev`` the scan read: an attempt that changed meanwhile (a span
    arrived, another store's watchdog flagged it) is left for the next scan.
    """
    rows = await conn.fetch(_UNHEALTHY, now)
    if not rows:
        return 0
    by_key = {(row[_STATE_ATTEMPT], row[_STATE_ATTEMPT + 1]): row for row in rows}
    flagged = logic.scan_unhealthy(
        ((attempt_from_row(row, _STATE_ATTEMPT), config_from_json(row[3])) for row in rows), now
    )
    done = 0
    for key, status in flagged.items():
        if await _write_attempt(conn, by_key[key], status, UNSET, UNSET, UNSET, now) is not None:
            done += 1
    return done


_ATTEMPT_BY_ID = (
    f"SELECT {ROLLOUT_COLUMNS}, {ATTEMPT_COLUMNS} FROM rollouts r JOIN attempts a "
    "ON a.rollout_id = r.rollout_id AND a.attempt_id = $2::text WHERE r.rollout_id = $1::text"
)


async def start_attempt(
    conn: Any, rollout_id: str, worker_id: str | None, ids: list[str], now: float, retrying: bool
) -> AttemptedRollout:
    """A manual retry: a new ``preparing`` attempt; the rollout becomes ``preparing`` (off the queue).

    ``ids[0]`` is the new attempt's id (redrawn in place on a collision), so a call retried after a
    lost acknowledgement finds the attempt its earlier try created instead of starting another.
    """
    if retrying:
        row = await conn.fetchrow(_ATTEMPT_BY_ID, rollout_id, ids[0])
        if row is not None:
            return rollout_from_row(row, attempt_from_row(row, 9))  # type: ignore[return-value]
    while True:
        row = await conn.fetchrow(
            f"SELECT r.ord, r.rev, r.attempt_count, {ROLLOUT_COLUMNS} FROM rollouts r "
            "WHERE r.rollout_id = $1::text",
            rollout_id,
        )
        if row is None:
            raise RolloutNotFoundError(rollout_id)
        attempt_id = ids[0]
        sequence_id = row[2] + 1
        params = Params(row[0], row[1], sequence_id, attempt_id, now, worker_id)
        worker = ""
        if worker_id:
            updates = logic.worker_updates_for_attempt("preparing", rollout_id, attempt_id, now)
            worker = f", w AS ({worker_upsert(params, worker_id, updates, when='EXISTS (SELECT 1 FROM g)')})"
        try:
            written = await conn.fetchval(
                f"""WITH g AS (
                    UPDATE rollouts SET rev = rev + 1, status = 'preparing', end_time = NULL,
                        queue_pos = NULL,
                        attempt_count = $3::int, latest_attempt_id = $4::text
                    WHERE ord = $1::bigint AND rev = $2::bigint RETURNING rollout_id
                ), a AS (
                    INSERT INTO attempts (rollout_id, attempt_id, sequence_id, status, start_time, worker_id)
                    SELECT rollout_id, $4::text, $3::int, 'preparing', $5::float8, $6::text FROM g
                ){worker}
                SELECT count(*) FROM g""",
                *params.values,
            )
        except asyncpg.exceptions.UniqueViolationError:
            ids[0] = logic.new_attempt_id()  # it repeated an older attempt's id of this rollout
            continue
        if written:
            rollout = rollout_from_row(row, offset=3)
            values = dict(rollout.__dict__)
            values.update(status="preparing", end_time=None)
            values["attempt"] = _new_attempt(rollout_id, attempt_id, sequence_id, now, worker_id)
            return construct(AttemptedRollout, values)


# ---------------------------------------------------------------------------------------------- rollouts

_ROLLOUT_TYPES = {
    "input": "text",
    "mode": "text",
    "resources_id": "text",
    "config": "text",
    "timeout_seconds": "float8",
    "unresponsive_seconds": "float8",
    "metadata": "text",
}


async def update_rollout(conn: Any, rollout_id: str, changes: dict[str, Any], now: float) -> Rollout:
    """Write the given (encoded) columns in one statement; ``status`` also sets end time and queue place."""
    params = Params(rollout_id)
    assignments = ["rev = rev + 1"]
    for key, value in changes.items():
        if key == "status":
            assignments.append(rollout_status_sql(params, value, now))
        else:
            assignments.append(f"{key} = {params.add(value, _ROLLOUT_TYPES[key])}")
    row = await conn.fetchrow(
        f"UPDATE rollouts r SET {', '.join(assignments)} WHERE r.rollout_id = $1::text "
        f"RETURNING {ROLLOUT_COLUMNS}",
        *params.values,
    )
    if row is None:
        raise RolloutNotFoundError(rollout_id)
    return rollout_from_row(row)


# ---------------------------------------------------------------------------------------------- workers


async def update_worker(conn: Any, worker_id: str, updates: dict[str, Any]) -> Worker:
    """Upsert a worker's heartbeat fields (already encoded) and return it."""
    params = Params()
    sql = worker_upsert(params, worker_id, updates)
    row = await conn.fetchrow(f"{sql} RETURNING {WORKER_COLUMNS}", *params.values)
    return worker_from_row(row)


def new_token() -> str:
    """A unique token marking the attempts one claim call creates."""
    return uuid.uuid4().hex
