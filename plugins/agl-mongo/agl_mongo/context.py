"""What every operation of a `MongoLightningStore` shares: partition, clock, connection, counters, inserts.

Each function runs its database calls through `MongoConnection.run`, one call per step, and makes
every step safe to retry after a connection loss: inserted documents carry the call's token (a
duplicate key holding our token on a retry means the first try landed), updates set absolute
values or are guarded, and calls that append carry a token the retry looks for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pymongo import ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import BulkWriteError, DuplicateKeyError

from agl_mongo.codec import SCHEMA_VERSION
from agl_mongo.connection import Collections, MongoConnection, Step

__all__ = ["StoreContext", "insert_new", "next_order"]

T = TypeVar("T")

_DUPLICATE_KEY = 11000


@dataclass
class StoreContext:
    """The partition, clock and connection of one store, and the hook that wakes its local waiters."""

    partition: str
    clock: Callable[[], float]
    conn: MongoConnection
    on_finished: Callable[[], None] = field(default=lambda: None)
    """Called after this store wrote a finished rollout status (wakes `wait_for_rollouts` at once)."""

    async def run(self, step: Step[T]) -> T:
        """Run one database step with the connection's retries."""
        return await self.conn.run(step)


async def next_order(ctx: StoreContext, count: int = 1) -> tuple[int, str | None]:
    """Reserve `count` consecutive order numbers of the partition; returns the last one and the latest
    resources id (read in the same atomic update).

    Order numbers give insertion order (field ``o``) and queue positions (in ``qk``). A retry after
    a lost acknowledgement may skip numbers, which only leaves a gap.
    """

    async def step(cols: Collections, retrying: bool) -> tuple[int, str | None]:
        for _ in range(3):
            try:
                doc = await cols.partitions.find_one_and_update(
                    {"_id": ctx.partition},
                    {"$inc": {"o": count}, "$setOnInsert": {"v": SCHEMA_VERSION}},
                    upsert=True,
                    return_document=ReturnDocument.AFTER,
                    projection={"o": 1, "res": 1},
                )
                assert doc is not None  # an upsert always returns the document
                return int(doc["o"]), doc.get("res")
            except DuplicateKeyError:  # a concurrent first use created the document: update it now
                continue
        raise RuntimeError(f"Could not create the counter of partition {ctx.partition!r}.")

    return await ctx.run(step)


async def insert_new(
    ctx: StoreContext, pick: Callable[[Collections], AsyncCollection[Any]], docs: Sequence[dict[str, Any]]
) -> list[int]:
    """Insert `docs` (keyed ``_id``s, each with the call's ``token``); return the indexes refused as taken.

    On a retry, a refused document whose stored twin carries the same token is ours from a try whose
    acknowledgement was lost, and counts as inserted. Refusals for other reasons raise.
    """
    if not docs:
        return []

    async def step(cols: Collections, retrying: bool) -> list[int]:
        collection = pick(cols)
        try:
            await collection.insert_many(list(docs), ordered=False)
            return []
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            if any(e.get("code") != _DUPLICATE_KEY for e in errors):
                raise
            refused = sorted(int(e["index"]) for e in errors)
        if retrying and refused:
            ids = [docs[i]["_id"] for i in refused]
            stored = {
                d["_id"]: d.get("token") async for d in collection.find({"_id": {"$in": ids}}, {"token": 1})
            }
            refused = [i for i in refused if stored.get(docs[i]["_id"]) != docs[i]["token"]]
        return refused

    return await ctx.run(step)
