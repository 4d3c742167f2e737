"""Rollout documents: creation, `update_rollout`, reads and queries.

A rollout is ONE document, so every status change is a single-document atomic update::

    {_id: key(partition, rollout_id), v: 1, pt: partition, rollout_id, input: JSON, start_time,
     end_time, mode, resources_id, status, config: JSON, wd: has a timeout/unresponsive limit,
     metadata: JSON | null, o: insertion order, token: the creating call,
     qk: queue key (partition + position; present only while queued),
     attempts: [{attempt_id, start_time, end_time, status, worker_id, last_heartbeat_time,
                 metadata: JSON | null, token}, ...],   # oldest first: sequence_id = position
     rev: bumped by every change (guards read-modify-write), sq: span sequence counter,
     so: span insertion counter}

Queue: a rollout is queued while it has ``qk``; dequeue claims the smallest ``qk`` of the partition
with one ``find_one_and_update`` (`agl_mongo.queue`). Leaving ``queuing``/``requeuing`` by any path
drops ``qk``; entering them sets it with ``$min`` to a fresh position, so a rollout that is still
queued keeps its place and is never queued twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pymongo import ReturnDocument

from agl_core.store import RolloutNotFoundError
from agl_core.store import logic as store_logic
from agl_core.types import Attempt, AttemptedRollout, PaginatedResult, Rollout
from agl_core.types.status import FINISHED_ROLLOUT_STATUSES
from agl_mongo.codec import SCHEMA_VERSION, attempts_of, new_attempt_entry, rollout_from_doc
from agl_mongo.connection import Collections
from agl_mongo.context import StoreContext, insert_new, next_order
from agl_mongo.keys import key, prefix_range, queue_key
from agl_mongo.queries import fetch_page, to_query
from agl_mongo.workers import upsert_worker

__all__ = [
    "ROLLOUT_SERVER_SORTABLE",
    "NewRollout",
    "counts",
    "create_rollouts",
    "get_latest_attempt",
    "get_rollout",
    "query_attempts",
    "query_rollouts",
    "rollouts_by_ids",
    "update_rollout",
]

ROLLOUT_SERVER_SORTABLE = frozenset(("rollout_id", "start_time", "status"))
"""Rollout fields that are never null, so MongoDB can sort on them."""

_ID_TRIES = 64
_WITHOUT_ATTEMPTS = {"attempts": 0}


@dataclass(frozen=True)
class NewRollout:
    """A validated rollout to create, with its JSON already encoded."""

    input_json: str
    mode: str | None
    resources_id: str | None
    config_json: str
    watched: bool
    metadata_json: str | None


def _rollout_doc(
    ctx: StoreContext,
    item: NewRollout,
    status: str,
    now: float,
    order: int,
    resources_id: str | None,
    attempts: list[dict[str, Any]],
    token: str,
) -> dict[str, Any]:
    rollout_id = store_logic.new_rollout_id()
    doc: dict[str, Any] = {
        "_id": key(ctx.partition, rollout_id),
        "v": SCHEMA_VERSION,
        "pt": ctx.partition,
        "rollout_id": rollout_id,
        "input": item.input_json,
        "start_time": now,
        "end_time": None,
        "mode": item.mode,
        "resources_id": resources_id,
        "status": status,
        "config": item.config_json,
        "wd": item.watched,
        "metadata": item.metadata_json,
        "o": order,
        "attempts": attempts,
        "rev": 0,
        "sq": 0,
        "so": 0,
        "token": token,
    }
    if store_logic.should_enqueue(status):
        doc["qk"] = queue_key(ctx.partition, order)
    return doc


async def create_rollouts(
    ctx: StoreContext, items: Sequence[NewRollout], status: str, worker_id: str | None, token: str
) -> list[Rollout]:
    """Create `items` in `status` (``queuing``: queued in order; ``preparing``: with attempt #1).

    Ids are drawn at random; an id already taken in the partition is redrawn.
    """
    if not items:
        return []
    now = ctx.clock()
    last, latest_resources = await next_order(ctx, len(items))
    first = last - len(items) + 1
    docs: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        attempts = []
        if status == "preparing":
            attempts.append(new_attempt_entry(store_logic.new_attempt_id(), now, worker_id, token))
        resources_id = latest_resources if item.resources_id is None else item.resources_id
        docs.append(_rollout_doc(ctx, item, status, now, first + index, resources_id, attempts, token))
    pending = list(range(len(docs)))
    for _ in range(_ID_TRIES):
        refused = await insert_new(ctx, _rollouts, [docs[i] for i in pending])
        pending = [pending[i] for i in refused]
        if not pending:
            break
        for i in pending:  # the id is taken: draw another one
            docs[i]["rollout_id"] = store_logic.new_rollout_id()
            docs[i]["_id"] = key(ctx.partition, docs[i]["rollout_id"])
    else:
        raise RuntimeError(f"Could not draw an unused rollout id after {_ID_TRIES} tries.")
    created = [rollout_from_doc(doc) for doc in docs]
    if worker_id and status == "preparing":
        for rollout in created:
            attempt = rollout.attempt  # type: ignore[attr-defined]
            updates = store_logic.worker_updates_for_attempt(
                "preparing", rollout.rollout_id, attempt.attempt_id, now
            )
            await upsert_worker(ctx, worker_id, updates)
    return created


def _rollouts(cols: Collections) -> Any:
    return cols.rollouts


async def update_rollout(ctx: StoreContext, rollout_id: str, changes: Mapping[str, Any]) -> Rollout:
    """Write the given (validated, encoded) fields; ``status`` also sets ``end_time`` and the queue."""
    sets = dict(changes)
    update: dict[str, Any] = {}
    status = sets.get("status")
    if status is not None:
        sets["end_time"] = store_logic.rollout_end_time_for(status, ctx.clock())
        if store_logic.should_enqueue(status):
            order, _ = await next_order(ctx)
            update["$min"] = {"qk": queue_key(ctx.partition, order)}  # keeps an earlier place
        else:
            update["$unset"] = {"qk": ""}
    if sets:
        update["$set"] = sets
        update["$inc"] = {"rev": 1}
    query = {"_id": key(ctx.partition, rollout_id)}

    async def step(cols: Collections, retrying: bool) -> Any:
        if not update:
            return await cols.rollouts.find_one(query, _WITHOUT_ATTEMPTS)
        return await cols.rollouts.find_one_and_update(
            query, update, projection=_WITHOUT_ATTEMPTS, return_document=ReturnDocument.AFTER
        )

    doc = await ctx.run(step)
    if doc is None:
        raise RolloutNotFoundError(rollout_id)
    if status in FINISHED_ROLLOUT_STATUSES:
        ctx.on_finished()
    return rollout_from_doc(doc, with_attempt=False)


# ---------------------------------------------------------------------------------------------- reads


async def _find_one(ctx: StoreContext, rollout_id: str, projection: Mapping[str, Any] | None = None) -> Any:
    async def step(cols: Collections, retrying: bool) -> Any:
        return await cols.rollouts.find_one({"_id": key(ctx.partition, rollout_id)}, projection)

    return await ctx.run(step)


async def get_rollout(ctx: StoreContext, rollout_id: str) -> Rollout | None:
    """The rollout with its latest attempt, or None."""
    doc = await _find_one(ctx, rollout_id)
    return None if doc is None else rollout_from_doc(doc)


async def get_latest_attempt(ctx: StoreContext, rollout_id: str) -> Attempt | None:
    """The attempt with the highest sequence id, or None."""
    doc = await _find_one(ctx, rollout_id, {"rollout_id": 1, "attempts": 1})
    if doc is None or not doc.get("attempts"):
        return None
    return attempts_of(doc)[-1]


async def query_attempts(
    ctx: StoreContext, rollout_id: str, sort_by: str | None, sort_order: str, limit: int, offset: int
) -> PaginatedResult[Attempt]:
    """Attempts of one rollout (embedded, so sorted and paged in Python); empty for an unknown id."""
    doc = await _find_one(ctx, rollout_id, {"rollout_id": 1, "attempts": 1})
    attempts = [] if doc is None else attempts_of(doc)
    return store_logic.paginate(store_logic.sort_items(attempts, sort_by, sort_order, Attempt), limit, offset)


async def query_rollouts(
    ctx: StoreContext,
    normalized: store_logic.NormalizedFilter,
    sort_by: str | None,
    sort_order: str,
    limit: int,
    offset: int,
) -> PaginatedResult[Rollout | AttemptedRollout]:
    """Rollouts matching `normalized`, sorted and paginated, each with its latest attempt."""
    query = to_query({"_id": prefix_range(ctx.partition)}, normalized)

    async def step(cols: Collections, retrying: bool) -> PaginatedResult[Rollout | AttemptedRollout]:
        return await fetch_page(
            cols.rollouts,
            query,
            sort_by=sort_by,
            sort_order=sort_order,
            limit=limit,
            offset=offset,
            model_type=Rollout,
            server_sortable=ROLLOUT_SERVER_SORTABLE,
            decode=rollout_from_doc,
        )

    return await ctx.run(step)


async def rollouts_by_ids(ctx: StoreContext, rollout_ids: Sequence[str]) -> dict[str, Rollout]:
    """The known rollouts among `rollout_ids` (without attempts), by id."""
    unique = list(dict.fromkeys(rollout_ids))
    if not unique:
        return {}

    async def step(cols: Collections, retrying: bool) -> list[Any]:
        query = {"_id": {"$in": [key(ctx.partition, rollout_id) for rollout_id in unique]}}
        return await cols.rollouts.find(query, _WITHOUT_ATTEMPTS).to_list()

    return {doc["rollout_id"]: rollout_from_doc(doc, with_attempt=False) for doc in await ctx.run(step)}


async def counts(ctx: StoreContext) -> tuple[int, int, int, int, int]:
    """Rollouts, attempts, spans, resources and workers of the partition."""

    async def step(cols: Collections, retrying: bool) -> tuple[int, int, int, int, int]:
        where = {"_id": prefix_range(ctx.partition)}
        rollouts = await cols.rollouts.count_documents(where)
        attempts = 0
        if rollouts:
            cursor = await cols.rollouts.aggregate(
                [{"$match": where}, {"$group": {"_id": None, "n": {"$sum": {"$size": "$attempts"}}}}]
            )
            for row in await cursor.to_list():
                attempts = int(row["n"])
        spans = await cols.spans.count_documents(where)
        resources = await cols.resources.count_documents(where)
        workers = await cols.workers.count_documents(where)
        return rollouts, attempts, spans, resources, workers

    return await ctx.run(step)
