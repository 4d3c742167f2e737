"""Resources snapshots: one document per resources id, holding its latest version.

``{_id: key(partition, resources_id), v, pt, resources_id, create_time, update_time, version,
resources: JSON, o: insertion order, t: order number of the last write, token}``. The partition
document remembers the latest snapshot (``res``) and the order number of that write (``rt``); it
only moves forward, so concurrent writers agree on which write was last. Updates are guarded by
``version`` and carry a token, so a retried update is recognised instead of bumping the version twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from pymongo.errors import DuplicateKeyError

from agl_core.store import logic as store_logic
from agl_core.types import PaginatedResult, ResourcesUpdate
from agl_mongo.codec import SCHEMA_VERSION, resources_from_doc
from agl_mongo.connection import Collections
from agl_mongo.context import StoreContext, insert_new, next_order
from agl_mongo.keys import key, prefix_range
from agl_mongo.queries import fetch_page, to_query

__all__ = [
    "RESOURCES_SERVER_SORTABLE",
    "add_resources",
    "get_latest_resources",
    "get_resources",
    "query_resources",
    "update_resources",
]

RESOURCES_SERVER_SORTABLE = frozenset(("resources_id", "create_time", "update_time", "version"))
"""Resources fields that are never null, so MongoDB can sort on them."""

_ID_TRIES = 64


def _resources(cols: Collections) -> Any:
    return cols.resources


async def _mark_latest(ctx: StoreContext, resources_id: str, order: int) -> None:
    async def step(cols: Collections, retrying: bool) -> None:
        await cols.partitions.update_one(
            {"_id": ctx.partition, "$or": [{"rt": {"$lt": order}}, {"rt": None}]},
            {"$set": {"res": resources_id, "rt": order}},
        )

    await ctx.run(step)


def _new_doc(
    ctx: StoreContext, resources_id: str, encoded: str, now: float, order: int, token: str
) -> dict[str, Any]:
    return {
        "_id": key(ctx.partition, resources_id),
        "v": SCHEMA_VERSION,
        "pt": ctx.partition,
        "resources_id": resources_id,
        "create_time": now,
        "update_time": now,
        "version": 1,
        "resources": encoded,
        "o": order,
        "t": order,
        "token": token,
    }


async def add_resources(ctx: StoreContext, encoded: str) -> ResourcesUpdate:
    """Store a new snapshot under a fresh ``rs-`` id at version 1; it becomes the latest."""
    now = ctx.clock()
    order, _ = await next_order(ctx)
    token = uuid.uuid4().hex
    for _ in range(_ID_TRIES):
        doc = _new_doc(ctx, store_logic.new_resources_id(), encoded, now, order, token)
        if not await insert_new(ctx, _resources, [doc]):
            break
    else:
        raise RuntimeError(f"Could not draw an unused resources id after {_ID_TRIES} tries.")
    await _mark_latest(ctx, doc["resources_id"], order)
    return resources_from_doc(doc)


async def update_resources(ctx: StoreContext, resources_id: str, encoded: str) -> ResourcesUpdate:
    """Upsert: version 1 for an unknown id, else version + 1 with a new update time; becomes the latest."""
    now = ctx.clock()
    order, _ = await next_order(ctx)
    token = uuid.uuid4().hex
    query = {"_id": key(ctx.partition, resources_id)}

    async def write(cols: Collections, retrying: bool) -> dict[str, Any] | None:
        current = await cols.resources.find_one(query)
        if current is not None and current.get("token") == token:
            return dict(current)  # a try whose acknowledgement was lost had written it
        if current is None:
            doc = _new_doc(ctx, resources_id, encoded, now, order, token)
            try:
                await cols.resources.insert_one(doc)
            except DuplicateKeyError:  # created concurrently: read it again and update it
                return None
            return doc
        changes = {"resources": encoded, "update_time": now, "version": current["version"] + 1, "t": order}
        changes["token"] = token
        result = await cols.resources.update_one(
            {"_id": current["_id"], "version": current["version"]}, {"$set": changes}
        )
        return {**current, **changes} if result.matched_count else None

    while True:
        written = await ctx.run(write)
        if written is not None:
            break
    await _mark_latest(ctx, resources_id, order)
    return resources_from_doc(written)


async def get_resources(ctx: StoreContext, resources_id: str) -> ResourcesUpdate | None:
    """The snapshot with this id, or None."""

    async def step(cols: Collections, retrying: bool) -> Any:
        return await cols.resources.find_one({"_id": key(ctx.partition, resources_id)})

    doc = await ctx.run(step)
    return None if doc is None else resources_from_doc(doc)


async def get_latest_resources(ctx: StoreContext) -> ResourcesUpdate | None:
    """The most recently added or updated snapshot, or None."""

    async def step(cols: Collections, retrying: bool) -> Any:
        return await cols.partitions.find_one({"_id": ctx.partition}, {"res": 1})

    marker: Mapping[str, Any] | None = await ctx.run(step)
    if not marker or marker.get("res") is None:
        return None
    return await get_resources(ctx, marker["res"])


async def query_resources(
    ctx: StoreContext,
    normalized: store_logic.NormalizedFilter,
    sort_by: str | None,
    sort_order: str,
    limit: int,
    offset: int,
) -> PaginatedResult[ResourcesUpdate]:
    """Snapshots matching `normalized`, sorted and paginated (insertion order by default)."""
    query = to_query({"_id": prefix_range(ctx.partition)}, normalized)

    async def step(cols: Collections, retrying: bool) -> PaginatedResult[ResourcesUpdate]:
        return await fetch_page(
            cols.resources,
            query,
            sort_by=sort_by,
            sort_order=sort_order,
            limit=limit,
            offset=offset,
            model_type=ResourcesUpdate,
            server_sortable=RESOURCES_SERVER_SORTABLE,
            decode=resources_from_doc,
        )

    return await ctx.run(step)
