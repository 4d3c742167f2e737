"""Attempt writes: `update_attempt`, the watchdog scan and span heartbeats.

These are read-modify-write cycles on one rollout document: read it, decide with the shared rules
of `agl_core.store.logic` (status propagation, retries, heartbeat transitions, unhealthy attempts),
then write with a filter on the document's ``rev``. If another writer changed the document in
between, the write matches nothing and the cycle starts again from a fresh read, so concurrent
updates never overwrite each other. Re-running a cycle after a lost acknowledgement recomputes from
the stored state and writes the same values, so retries are safe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from pymongo import ReturnDocument

from agl_core.store import UNSET, AttemptNotFoundError, RolloutNotFoundError, Unset
from agl_core.store import logic as store_logic
from agl_core.types import Attempt, Rollout, RolloutConfig
from agl_core.types.status import FINISHED_ROLLOUT_STATUSES
from agl_mongo.codec import attempt_from_entry, config_from_json, load_json
from agl_mongo.connection import Collections
from agl_mongo.context import StoreContext, next_order
from agl_mongo.keys import key, queue_key
from agl_mongo.workers import upsert_worker

__all__ = ["heartbeat", "scan", "update_attempt"]

_STATE = {"rollout_id": 1, "status": 1, "config": 1, "attempts": 1, "rev": 1}
_ACTIVE = ("preparing", "running")

Precondition = Callable[[Mapping[str, Any], Attempt, RolloutConfig], bool]
"""``check(rollout_doc, attempt, config)``: whether a watchdog flag still applies at write time."""


async def _read_state(ctx: StoreContext, rollout_id: str) -> Any:
    async def step(cols: Collections, retrying: bool) -> Any:
        return await cols.rollouts.find_one({"_id": key(ctx.partition, rollout_id)}, _STATE)

    return await ctx.run(step)


async def _write_guarded(ctx: StoreContext, doc: Mapping[str, Any], attempt_id: str, update: Any) -> bool:
    """Apply `update` to `doc`'s attempt `attempt_id` if nobody changed the document since it was read."""

    async def step(cols: Collections, retrying: bool) -> bool:
        result = await cols.rollouts.update_one(
            {"_id": doc["_id"], "rev": doc["rev"], "attempts.attempt_id": attempt_id}, update
        )
        return result.matched_count == 1

    return await ctx.run(step)


def _status_update(
    update: dict[str, Any], sets: dict[str, Any], status: str, now: float, queue: str | None
) -> None:
    """Add a rollout status write (end time, queue key `queue` if it enters the queue) to `update`."""
    sets["status"] = status
    sets["end_time"] = store_logic.rollout_end_time_for(status, now)
    if store_logic.should_enqueue(status):
        update["$min"] = {"qk": queue}
    else:
        update["$unset"] = {"qk": ""}


async def update_attempt(
    ctx: StoreContext,
    rollout_id: str,
    attempt_id: str | Literal["latest"],
    status: str | Unset,
    worker_id: str | Unset | None,
    last_heartbeat_time: float | Unset | None,
    metadata_json: str | Unset | None,
    *,
    precondition: Precondition | None = None,
) -> Attempt | None:
    """`LightningStore.update_attempt` with validated arguments (`UNSET` leaves a field alone).

    With a `precondition` (the watchdog) nothing is written, and None returned, once it fails.
    """
    queue: str | None = None
    while True:
        doc = await _read_state(ctx, rollout_id)
        if doc is None:
            raise RolloutNotFoundError(rollout_id)
        entries = doc.get("attempts") or []
        if attempt_id == "latest":
            index = len(entries) - 1
        else:
            index = next((i for i, e in enumerate(entries) if e["attempt_id"] == attempt_id), -1)
        if index < 0:
            raise AttemptNotFoundError(rollout_id, attempt_id)
        attempt = attempt_from_entry(rollout_id, entries[index], index + 1)
        config = config_from_json(doc["config"])
        if precondition is not None and not precondition(doc, attempt, config):
            return None
        now = ctx.clock()
        changes: dict[str, Any] = {}
        if status is not UNSET:
            changes["status"] = status
            changes["end_time"] = store_logic.attempt_end_time_for(status, now)  # type: ignore[arg-type]
        if worker_id is not UNSET:
            changes["worker_id"] = worker_id
        if last_heartbeat_time is not UNSET:
            changes["last_heartbeat_time"] = last_heartbeat_time
        stored = dict(changes)
        if metadata_json is not UNSET:
            stored["metadata"] = metadata_json
            changes["metadata"] = load_json(metadata_json)  # type: ignore[arg-type]
        updated = attempt.model_copy(update=changes)
        new_status = None
        if isinstance(status, str):
            view = Rollout.model_construct(rollout_id=rollout_id, status=doc["status"], config=config)
            new_status = store_logic.next_rollout_status_after_attempt_update(
                view, attempt, status, is_latest=index == len(entries) - 1
            )
        sets = {f"attempts.$.{key}": value for key, value in stored.items()}
        update: dict[str, Any] = {}
        if new_status is not None:
            if store_logic.should_enqueue(new_status) and queue is None:
                order, _ = await next_order(ctx)
                queue = queue_key(ctx.partition, order)
            _status_update(update, sets, new_status, now, queue)
        if not sets or await _write_guarded(
            ctx, doc, attempt.attempt_id, {**update, "$set": sets, "$inc": {"rev": 1}}
        ):
            break
    if new_status in FINISHED_ROLLOUT_STATUSES:
        ctx.on_finished()
    if store_logic.worker_sync_required(worker_id, status, attempt.worker_id) and updated.worker_id:
        await upsert_worker(
            ctx,
            updated.worker_id,
            store_logic.worker_updates_for_attempt(updated.status, rollout_id, updated.attempt_id, now),
        )
    return updated


async def scan(ctx: StoreContext) -> None:
    """The watchdog: flag timed-out/unresponsive latest attempts of held rollouts (`store_logic` decides).

    Candidates are rollouts in ``preparing``/``running`` whose config has a limit; each flag goes
    through `update_attempt` and is re-checked against the document it writes, so a heartbeat that
    lands first wins.
    """

    async def step(cols: Collections, retrying: bool) -> list[Any]:
        query = {"pt": ctx.partition, "wd": True, "status": {"$in": list(_ACTIVE)}}
        return await cols.rollouts.find(query, _STATE).to_list()

    docs = await ctx.run(step)
    now = ctx.clock()
    candidates = []
    for doc in docs:
        entries = doc.get("attempts") or []
        if entries:
            latest = attempt_from_entry(doc["rollout_id"], entries[-1], len(entries))
            candidates.append((latest, config_from_json(doc["config"])))
    for (rollout_id, attempt_id), flag in store_logic.scan_unhealthy(candidates, now).items():
        await update_attempt(
            ctx, rollout_id, attempt_id, flag, UNSET, UNSET, UNSET, precondition=_still_flagged(ctx, flag)
        )


def _still_flagged(ctx: StoreContext, flag: str) -> Precondition:
    def check(doc: Mapping[str, Any], attempt: Attempt, config: RolloutConfig) -> bool:
        return (
            doc["status"] in _ACTIVE
            and attempt.sequence_id == len(doc["attempts"])
            and store_logic.unhealthy_attempt_status(attempt, config, ctx.clock()) == flag
        )

    return check


def _transition_update(
    doc: Mapping[str, Any], attempt_id: str, now: float
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The ``($set, other operators)`` of the heartbeat transition `doc` calls for, or None if none."""
    entries = doc["attempts"]
    index = next(i for i, e in enumerate(entries) if e["attempt_id"] == attempt_id)
    current = entries[index]["status"]
    new_attempt, new_rollout = store_logic.heartbeat_transition(
        doc["status"], current, is_latest=index == len(entries) - 1
    )
    if new_attempt == current and new_rollout is None:
        return None
    sets: dict[str, Any] = {}
    update: dict[str, Any] = {}
    if new_attempt != current:
        sets["attempts.$.status"] = new_attempt
        sets["attempts.$.end_time"] = store_logic.attempt_end_time_for(new_attempt, now)
    if new_rollout is not None:
        _status_update(update, sets, new_rollout, now, None)  # "running": leaves the queue
    return sets, update


async def heartbeat(
    ctx: StoreContext,
    rollout_id: str,
    attempt_id: str,
    max_sequence_id: int,
    now: float,
    known: Mapping[str, Any] | None = None,
) -> None:
    """A span arrived: stamp the attempt's heartbeat, raise the sequence counter, then apply fix 1.

    With `known` (the document's state, read by the caller) stamp and transition are one write
    guarded by its ``rev``. Otherwise, or if the document changed meanwhile, the stamp is one atomic
    update returning the state before it, and the transition (when
    `store_logic.heartbeat_transition` calls for one) a guarded write after it.
    """
    stamp_sets = {"attempts.$.last_heartbeat_time": now}
    if known is not None:
        planned = _transition_update(known, attempt_id, now)
        sets, update = planned if planned is not None else ({}, {})
        write = {
            **update,
            "$set": {**stamp_sets, **sets},
            "$max": {"sq": max_sequence_id},
            "$inc": {"rev": 1},
        }
        if await _write_guarded(ctx, known, attempt_id, write):
            return
    query = {"_id": key(ctx.partition, rollout_id), "attempts.attempt_id": attempt_id}

    async def stamp(cols: Collections, retrying: bool) -> Any:
        return await cols.rollouts.find_one_and_update(
            query,
            {"$set": stamp_sets, "$max": {"sq": max_sequence_id}, "$inc": {"rev": 1}},
            projection=_STATE,
            return_document=ReturnDocument.BEFORE,
        )

    doc = await ctx.run(stamp)
    if doc is not None:
        doc["rev"] += 1  # our own stamp
    while doc is not None:
        planned = _transition_update(doc, attempt_id, now)
        if planned is None:
            return
        sets, update = planned
        if await _write_guarded(ctx, doc, attempt_id, {**update, "$set": sets, "$inc": {"rev": 1}}):
            return
        doc = await _read_state(ctx, rollout_id)
