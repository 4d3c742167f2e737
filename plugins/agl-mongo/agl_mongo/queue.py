"""Claiming rollouts: `dequeue` (FIFO) and `start_attempt`, each one atomic ``find_one_and_update``.

A claim appends a new ``preparing`` attempt to the rollout document, sets the rollout to
``preparing`` and drops its queue position in the same update, so two workers can never receive the
same queue entry. The new attempt carries a random token: a claim retried after a lost
acknowledgement first looks for its token, so it neither loses the rollout it claimed nor claims a
second one. Attempts are appended with ``$addToSet`` (every entry is unique through its token), which
behaves as ``$push`` here and also works on MongoDB-protocol servers whose ``$push`` is incomplete.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from pymongo import ReturnDocument

from agl_core.store import RolloutNotFoundError
from agl_core.store import logic as store_logic
from agl_core.types import AttemptedRollout
from agl_mongo.codec import attempt_from_entry, new_attempt_entry, rollout_from_doc
from agl_mongo.connection import Collections
from agl_mongo.context import StoreContext
from agl_mongo.keys import key, prefix_range
from agl_mongo.workers import mark_empty_dequeue, upsert_worker

__all__ = ["dequeue", "start_attempt"]


def _claim_update(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "$unset": {"qk": ""},
        "$set": {"status": "preparing", "end_time": None},
        "$addToSet": {"attempts": entry},
        "$inc": {"rev": 1},
    }


async def _claim(
    ctx: StoreContext, query: dict[str, Any], now: float, worker_id: str | None, *, fifo: bool
) -> AttemptedRollout | None:
    """Append a new attempt to the rollout `query` selects (the queue head if `fifo`); None if none."""
    token = uuid.uuid4().hex
    entry = new_attempt_entry(store_logic.new_attempt_id(), now, worker_id, token)

    async def step(cols: Collections, retrying: bool) -> Any:
        if retrying:
            scope = {"_id": prefix_range(ctx.partition), "attempts.token": token}
            mine = await cols.rollouts.find_one(scope)
            if mine is not None:
                return mine
        return await cols.rollouts.find_one_and_update(
            query,
            _claim_update(entry),
            sort=[("qk", 1)] if fifo else None,
            return_document=ReturnDocument.AFTER,
        )

    doc = await ctx.run(step)
    if doc is None:
        return None
    return await _claimed(ctx, doc, token)


async def _claimed(ctx: StoreContext, doc: dict[str, Any], token: str) -> AttemptedRollout:
    """The claimed rollout with the attempt `token` created; redraws its id if the rollout had it."""
    attempts = doc["attempts"]
    index = next(i for i, a in enumerate(attempts) if a.get("token") == token)
    entry = attempts[index]
    taken = [a["attempt_id"] for a in attempts]
    if taken.count(entry["attempt_id"]) > 1:  # 32 random bits collided within one rollout
        new_id = store_logic.draw_unique_id(store_logic.new_attempt_id, set(taken))

        async def rename(cols: Collections, retrying: bool) -> None:
            await cols.rollouts.update_one(
                {"_id": doc["_id"], "attempts.token": token},
                {"$set": {"attempts.$.attempt_id": new_id}, "$inc": {"rev": 1}},
            )

        await ctx.run(rename)
        entry["attempt_id"] = new_id
    rollout = rollout_from_doc(doc, with_attempt=False)
    attempt = attempt_from_entry(doc["rollout_id"], entry, index + 1)
    return AttemptedRollout.model_construct(**rollout.__dict__, attempt=attempt)


async def dequeue(ctx: StoreContext, limit: int, worker_id: str | None) -> list[AttemptedRollout]:
    """Claim up to `limit` queued rollouts in FIFO order; book the worker (busy, or idle if none)."""
    now = ctx.clock()
    # Only queuing/requeuing rollouts have a queue key (every status write keeps that true), so the
    # status needs no condition here: the claim is one range scan of the partition's queue keys.
    head = {"qk": prefix_range(ctx.partition)}
    claimed: list[AttemptedRollout] = []
    while len(claimed) < limit:
        item = await _claim(ctx, head, now, worker_id, fifo=True)
        if item is None:
            break
        claimed.append(item)
    if worker_id:
        if claimed:
            last = claimed[-1]
            updates = store_logic.worker_updates_for_attempt(
                "preparing", last.rollout_id, last.attempt.attempt_id, now, dequeue=True
            )
            await upsert_worker(ctx, worker_id, updates)
        else:
            await mark_empty_dequeue(ctx, worker_id, now)
    return claimed


async def start_attempt(ctx: StoreContext, rollout_id: str, worker_id: str | None) -> AttemptedRollout:
    """A manual retry: a new ``preparing`` attempt on any rollout (it leaves the queue if queued)."""
    now = ctx.clock()
    claimed = await _claim(ctx, {"_id": key(ctx.partition, rollout_id)}, now, worker_id, fifo=False)
    if claimed is None:
        raise RolloutNotFoundError(rollout_id)
    if worker_id:
        updates = store_logic.worker_updates_for_attempt(
            "preparing", rollout_id, claimed.attempt.attempt_id, now
        )
        await upsert_worker(ctx, worker_id, updates)
    return claimed
