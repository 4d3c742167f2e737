"""Connections of a `MongoLightningStore`: one `AsyncMongoClient` per event loop, setup, and retries.

pymongo's async client is bound to the event loop it first runs on, so a store used from several
threads (each with its own loop) keeps one client per loop, created on first use under a lock.
Every database call goes through `MongoConnection.run`, which retries on connection loss with
exponential backoff for up to ``retry_timeout`` seconds and then raises `StoreUnavailableError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pymongo import ASCENDING, AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import ConnectionFailure, DuplicateKeyError

from agl_core.store import StoreClosedError
from agl_mongo.codec import SCHEMA_VERSION
from agl_mongo.errors import SchemaVersionError, StoreUnavailableError

__all__ = ["Collections", "MongoConnection", "Step"]

T = TypeVar("T")

_FIRST_DELAY = 0.05
_MAX_DELAY = 1.0

_INDEXES: dict[str, list[tuple[list[tuple[str, int]], bool]]] = {
    "rollouts": [
        ([("qk", ASCENDING)], False),
        ([("pt", ASCENDING), ("wd", ASCENDING), ("status", ASCENDING)], False),
    ],
    "spans": [
        (
            [("pt", ASCENDING), ("rollout_id", ASCENDING), ("attempt_id", ASCENDING), ("span_id", ASCENDING)],
            True,
        ),
    ],
}
"""Secondary indexes: (keys, unique), created on first use (creating an existing one is a no-op).

Every document's ``_id`` is its key (`agl_mongo.keys`), so lookups and partition or rollout ranges
use ``_id``. The queue order, the watchdog's candidates and the uniqueness of a span's
``(partition, rollout_id, attempt_id, span_id)`` need more.
"""


@dataclass(frozen=True)
class Collections:
    """The store's collections, bound to the client of the calling event loop."""

    rollouts: AsyncCollection[Any]
    """One document per rollout, embedding its attempts (see `agl_mongo.rollouts`)."""
    spans: AsyncCollection[Any]
    """One document per span."""
    resources: AsyncCollection[Any]
    """One document per resources id (the latest version)."""
    workers: AsyncCollection[Any]
    """One document per worker."""
    partitions: AsyncCollection[Any]
    """One document per partition: the order counter and the latest resources id."""
    sequences: AsyncCollection[Any]
    """Span sequence counters of rollout ids that have no rollout document."""
    meta: AsyncCollection[Any]
    """Database-wide facts: the schema version."""


Step = Callable[[Collections, bool], Awaitable[T]]
"""One database call: ``step(collections, retrying)``. `retrying` is True when an earlier try of the
same step failed on the connection, so its write may or may not have been applied."""


class MongoConnection:
    """Clients (one per event loop), the one-time setup, and the retry loop of one store."""

    def __init__(
        self,
        uri: str,
        display_uri: str,
        database: str,
        client_kwargs: Mapping[str, Any],
        retry_timeout: float,
    ) -> None:
        self.uri = uri
        self.display_uri = display_uri
        """The URI with its password hidden, for messages."""
        self.database = database
        self.retry_timeout = retry_timeout
        self._client_kwargs = dict(client_kwargs)
        self._lock = threading.Lock()
        self._clients: dict[asyncio.AbstractEventLoop, tuple[AsyncMongoClient[Any], Collections]] = {}
        self._ready = False
        self.closed = False
        self.retries = 0
        """Database calls retried after a connection failure since the store was opened."""

    # ------------------------------------------------------------------ clients

    def _collections(self) -> Collections:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.closed:
                raise StoreClosedError("The MongoDB store is closed; open a new one.")
            entry = self._clients.get(loop)
            if entry is None:
                for other in [lp for lp in self._clients if lp.is_closed()]:
                    del self._clients[other]  # its loop is gone; the client cannot be used again
                client: AsyncMongoClient[Any] = AsyncMongoClient(self.uri, **self._client_kwargs)
                db = client[self.database]
                entry = (
                    client,
                    Collections(
                        rollouts=db["rollouts"],
                        spans=db["spans"],
                        resources=db["resources"],
                        workers=db["workers"],
                        partitions=db["partitions"],
                        sequences=db["sequences"],
                        meta=db["meta"],
                    ),
                )
                self._clients[loop] = entry
            return entry[1]

    async def close(self) -> None:
        """Close every client: this loop's directly, other running loops' on their own loop."""
        with self._lock:
            self.closed = True
            clients = list(self._clients.items())
            self._clients.clear()
        current = asyncio.get_running_loop()
        for loop, (client, _) in clients:
            if loop is current:
                await client.close()
            elif loop.is_running():
                future = asyncio.run_coroutine_threadsafe(client.close(), loop)
                # If that loop is busy or stopping, its client goes with it.
                with contextlib.suppress(asyncio.TimeoutError, RuntimeError):
                    await asyncio.wait_for(asyncio.wrap_future(future), 5.0)

    # ------------------------------------------------------------------ calls

    async def run(self, step: Step[T]) -> T:
        """Run `step` on this loop's collections, retrying on connection loss (see the module doc)."""
        cols = self._collections()
        if not self._ready:
            await self._retrying(_setup, cols)
            self._ready = True
        return await self._retrying(step, cols)

    async def _retrying(self, step: Step[T], cols: Collections) -> T:
        first_failure: float | None = None
        delay = _FIRST_DELAY
        retrying = False
        while True:
            try:
                return await step(cols, retrying)
            except ConnectionFailure as exc:
                now = time.monotonic()
                if first_failure is None:
                    first_failure = now
                waited = now - first_failure
                if waited >= self.retry_timeout or self.closed:
                    raise StoreUnavailableError(self.display_uri, waited, exc) from exc
                pause = min(delay, self.retry_timeout - waited) * random.uniform(0.5, 1.0)
                self.retries += 1
                await asyncio.sleep(pause)
                delay = min(delay * 2, _MAX_DELAY)
                retrying = True


async def _setup(cols: Collections, retrying: bool) -> None:
    """Check the schema version and create the indexes (idempotent)."""
    with contextlib.suppress(DuplicateKeyError):  # another process may create it at the same moment
        await cols.meta.update_one(
            {"_id": "schema"}, {"$setOnInsert": {"version": SCHEMA_VERSION}}, upsert=True
        )
    doc = await cols.meta.find_one({"_id": "schema"})
    version = (doc or {}).get("version", SCHEMA_VERSION)
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"This MongoDB database holds agl-mongo schema version {version}, newer than this agl-mongo "
            f"({SCHEMA_VERSION}). Upgrade agl-mongo, or use another database."
        )
    for name, indexes in _INDEXES.items():
        collection: AsyncCollection[Any] = getattr(cols, name)
        for keys, unique in indexes:
            await collection.create_index(keys, unique=unique)
