"""Worker documents: upserts from attempt writes and heartbeats, lookups and queries.

A worker document (``_id`` = ``key(partition, worker_id)``) holds the `Worker` fields
(``heartbeat_stats`` as JSON text) plus ``pt`` and ``o`` (insertion order, set right after the
document is created). Every write sets absolute values,
so it is safe to retry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pymongo.errors import DuplicateKeyError

from agl_core.store import logic as store_logic
from agl_core.types import PaginatedResult, Worker
from agl_mongo.codec import SCHEMA_VERSION, dump_json, worker_from_doc
from agl_mongo.connection import Collections
from agl_mongo.context import StoreContext, next_order
from agl_mongo.keys import key, prefix_range
from agl_mongo.queries import to_query

__all__ = ["get_worker", "mark_empty_dequeue", "query_workers", "upsert_worker"]


_DEFAULTS: dict[str, Any] = {
    name: field.default for name, field in Worker.model_fields.items() if name != "worker_id"
}


async def upsert_worker(
    ctx: StoreContext, worker_id: str, updates: Mapping[str, Any], *, fetch: bool = False
) -> Worker | None:
    """Create the worker or apply `updates` (from `store_logic.worker_updates_*`); return it if `fetch`.

    A new worker gets the `Worker` defaults for the fields `updates` does not set, then its
    insertion order.
    """
    sets = dict(updates)
    stats = sets.get("heartbeat_stats")
    if stats is not None:
        sets["heartbeat_stats"] = dump_json("heartbeat_stats", stats)
    on_insert = {
        "v": SCHEMA_VERSION,
        "pt": ctx.partition,
        "worker_id": worker_id,
        **{k: v for k, v in _DEFAULTS.items() if k not in sets},
    }
    query = {"_id": key(ctx.partition, worker_id)}

    async def step(cols: Collections, retrying: bool) -> Any:
        for _ in range(3):
            try:
                result = await cols.workers.update_one(
                    query, {"$set": sets, "$setOnInsert": on_insert}, upsert=True
                )
                return result.upserted_id
            except DuplicateKeyError:  # created concurrently: the next try updates it
                continue
        raise RuntimeError(f"Could not upsert worker {worker_id!r}.")

    created = await ctx.run(step)
    if created is not None:  # record the new worker's insertion order
        order, _ = await next_order(ctx)

        async def set_order(cols: Collections, retrying: bool) -> None:
            await cols.workers.update_one({"_id": created, "o": None}, {"$set": {"o": order}})

        await ctx.run(set_order)
    return await get_worker(ctx, worker_id) if fetch else None


async def mark_empty_dequeue(ctx: StoreContext, worker_id: str, now: float) -> None:
    """Book a dequeue that found nothing: the worker becomes (or stays) ``idle``."""

    async def touch_idle(cols: Collections, retrying: bool) -> int:
        result = await cols.workers.update_one(
            {"_id": key(ctx.partition, worker_id), "status": "idle"},
            {"$set": store_logic.worker_updates_for_empty_dequeue("idle", now)},
        )
        return result.matched_count

    if not await ctx.run(touch_idle):
        await upsert_worker(ctx, worker_id, store_logic.worker_updates_for_empty_dequeue(None, now))


async def get_worker(ctx: StoreContext, worker_id: str) -> Worker | None:
    """The worker with this id, or None."""

    async def step(cols: Collections, retrying: bool) -> Any:
        return await cols.workers.find_one({"_id": key(ctx.partition, worker_id)})

    doc = await ctx.run(step)
    return None if doc is None else worker_from_doc(doc)


async def query_workers(
    ctx: StoreContext,
    normalized: store_logic.NormalizedFilter,
    sort_by: str | None,
    sort_order: str,
    limit: int,
    offset: int,
) -> PaginatedResult[Worker]:
    """Workers matching `normalized`, sorted (in Python: workers are few) and paginated."""
    query = to_query({"_id": prefix_range(ctx.partition)}, normalized)

    async def step(cols: Collections, retrying: bool) -> list[Any]:
        return await cols.workers.find(query).to_list()

    docs = await ctx.run(step)
    docs.sort(key=_insertion_key)
    items = store_logic.sort_items([worker_from_doc(d) for d in docs], sort_by, sort_order, Worker)
    return store_logic.paginate(items, limit, offset)


def _insertion_key(doc: Mapping[str, Any]) -> tuple[int, int]:
    order = doc.get("o")
    return (1, 0) if order is None else (0, int(order))
