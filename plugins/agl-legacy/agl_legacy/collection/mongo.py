"""Agent Lightning 0.3's MongoDB collections: `agl_legacy.collection`'s interfaces on pymongo.

`MongoLightningCollections` holds the state of a `CollectionBasedLightningStore` in seven MongoDB
collections (``rollouts``, ``attempts``, ``spans``, ``resources``, ``workers``, ``rollout_queue``,
``span_sequence_ids``), every document tagged with a ``partition_id`` so that several stores share one
database. `MongoClientPool` keeps one `AsyncMongoClient` per event loop.

Atomicity, as in 0.3: single-document operations (a dequeue, a counter increment) are atomic on the
server; an `atomic()` block is serialized with the other blocks of this process (0.3 locked only
``generic`` blocks) but not with other processes; ``execute(callback, commit=True)`` runs the callback in
a MongoDB transaction (pymongo's ``with_transaction``, which retries transient errors), which needs a
replica set. For many processes on a plain server, use agl-mongo's `MongoLightningStore` instead.
Needs pymongo (``pip install 'agl-legacy[mongo]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter
from pymongo import ASCENDING, AsyncMongoClient, ReadPreference, ReturnDocument, WriteConcern
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure
from pymongo.read_concern import ReadConcern

from agl_core.types import (
    Attempt,
    FilterOptions,
    PaginatedResult,
    ResourcesUpdate,
    Rollout,
    SortOptions,
    Span,
    Worker,
)
from agl_legacy.collection import Collection, KeyValue, LightningCollections, Queue
from agl_legacy.collection.base import (
    AtomicLabels,
    AtomicMode,
    DuplicatedPrimaryKeyError,
    ensure_numeric,
    normalize_filter_options,
    resolve_sort_options,
)

__all__ = [
    "MongoBasedCollection",
    "MongoBasedKeyValue",
    "MongoBasedQueue",
    "MongoClientPool",
    "MongoLightningCollections",
    "resolve_mongo_error_type",
]

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")

_LOCK_POLL_SECONDS = 0.001


class MongoClientPool:
    """One `AsyncMongoClient` per event loop for ``mongo_uri`` (pymongo's async client is loop-bound)."""

    def __init__(self, *, mongo_uri: str, mongo_client_kwargs: Mapping[str, Any] | None = None) -> None:
        self._mongo_uri = mongo_uri
        self._mongo_client_kwargs = dict(mongo_client_kwargs or {})
        self._clients: dict[int, AsyncMongoClient[Any]] = {}
        self._lock = threading.Lock()

    async def __aenter__(self) -> MongoClientPool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def get_client(self) -> AsyncMongoClient[Any]:
        """The client of the running event loop, created (and connected) on first use."""
        key = id(asyncio.get_running_loop())
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = self._clients[key] = AsyncMongoClient(self._mongo_uri, **self._mongo_client_kwargs)
        await client.aconnect()
        return client

    async def get_collection(self, database_name: str, collection_name: str) -> AsyncCollection[Any]:
        """A collection, through the running loop's client."""
        return (await self.get_client())[database_name][collection_name]

    async def close(self) -> None:
        """Close every client of the pool (the pool can be used again afterwards)."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()


async def _index(collection: AsyncCollection[Any], keys: Sequence[str], *, unique: bool) -> None:
    """Create an index (creating an existing identical index is a no-op on the server)."""
    await collection.create_index([(key, ASCENDING) for key in keys], unique=unique)


def _conditions(field: str, ops: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for op, value in ops.items():
        if value is None:
            continue  # as in 0.3 (and agl's in-memory collections): a None operand is no condition
        if op == "exact":
            out.append({field: value})
        elif op == "within":
            out.append({field: {"$in": list(value)}})
        elif op == "contains":
            out.append({field: {"$regex": re.escape(str(value))}})
        else:
            raise ValueError(f"Unsupported filter operator '{op}' for field '{field}'")
    return out


def _and(conditions: list[dict[str, Any]]) -> dict[str, Any]:
    return {} if not conditions else conditions[0] if len(conditions) == 1 else {"$and": conditions}


def mongo_filter(filter: FilterOptions | None, partition_id: str) -> dict[str, Any]:
    """A MongoDB query for `FilterOptions`, limited to ``partition_id`` (``_must`` always ANDs in)."""
    fields, must, aggregate = normalize_filter_options(filter)
    regular = [c for field, ops in (fields or {}).items() for c in _conditions(field, ops)]
    required = [c for field, ops in (must or {}).items() for c in _conditions(field, ops)]
    if regular and aggregate == "or":
        regular = [regular[0] if len(regular) == 1 else {"$or": regular}]
    return _and([{"partition_id": partition_id}, *regular, *required])


class _Sessioned:
    """The settings every container shares: pool, database, collection name, partition, session."""

    def __init__(
        self, client_pool: MongoClientPool, database_name: str, collection_name: str, partition_id: str
    ) -> None:
        self._client_pool = client_pool
        self._database_name = database_name
        self._collection_name = collection_name
        self._partition_id = partition_id
        self._session: AsyncClientSession | None = None
        self._ensured = False

    async def _indexes(self, collection: AsyncCollection[Any]) -> None:
        raise NotImplementedError

    async def ensure_collection(self) -> AsyncCollection[Any]:
        """The backing collection, with its indexes created on first use."""
        collection = await self._client_pool.get_collection(self._database_name, self._collection_name)
        if not self._ensured:
            await self._indexes(collection)
            self._ensured = True
        return collection


class MongoBasedCollection(_Sessioned, Collection[M]):
    """A `Collection` of pydantic models in one MongoDB collection, unique on partition + primary keys.

    Sorting puts None (null) before every value, as MongoDB does.
    """

    def __init__(
        self,
        client_pool: MongoClientPool,
        database_name: str,
        collection_name: str,
        partition_id: str,
        primary_keys: Sequence[str],
        item_type: type[M],
        extra_indexes: Sequence[Sequence[str]] = (),
        tracker: object | None = None,
    ) -> None:
        Collection.__init__(self, tracker=tracker)
        _Sessioned.__init__(self, client_pool, database_name, collection_name, partition_id)
        if not primary_keys:
            raise ValueError("primary_keys must be non-empty")
        if not (isinstance(item_type, type) and issubclass(item_type, BaseModel)):
            raise ValueError(f"item_type must be a subclass of pydantic BaseModel, got {item_type!r}")
        self._primary_keys = list(primary_keys)
        self._item_type = item_type
        self._extra_indexes = [list(index) for index in extra_indexes]

    @property
    def collection_name(self) -> str:
        """The MongoDB collection's name."""
        return self._collection_name

    def with_session(self, session: AsyncClientSession) -> MongoBasedCollection[M]:
        """The same collection, its operations in ``session`` (a transaction)."""
        bound = MongoBasedCollection(
            self._client_pool,
            self._database_name,
            self._collection_name,
            self._partition_id,
            self._primary_keys,
            self._item_type,
            self._extra_indexes,
        )
        bound._ensured, bound._session = self._ensured, session
        return bound

    async def _indexes(self, collection: AsyncCollection[Any]) -> None:
        await _index(collection, ["partition_id", *self._primary_keys], unique=True)
        for index in self._extra_indexes:
            await _index(collection, index, unique=False)

    def primary_keys(self) -> Sequence[str]:
        """The fields that identify an item."""
        return self._primary_keys

    def item_type(self) -> type[M]:
        """The model class of the items."""
        return self._item_type

    def _doc(self, item: M) -> dict[str, Any]:
        if not isinstance(item, self._item_type):
            raise TypeError(f"Expected item of type {self._item_type.__name__}, got {type(item).__name__}")
        doc = item.model_dump(mode="json")
        doc["partition_id"] = self._partition_id
        return doc

    def _key(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        return {"partition_id": self._partition_id, **{pk: doc.get(pk) for pk in self._primary_keys}}

    def _item(self, doc: Mapping[str, Any]) -> M:
        return self._item_type.model_validate(
            {k: v for k, v in doc.items() if k not in ("_id", "partition_id")}
        )

    def _sort(self, sort: SortOptions | None) -> list[tuple[str, int]] | None:
        name, order = resolve_sort_options(sort)
        if name is None:
            return None
        if name not in self._item_type.model_fields:
            raise ValueError(
                f"Failed to sort items by '{name}': field does not exist on {self._item_type.__name__}"
            )
        return [(name, 1 if order == "asc" else -1), ("_id", 1)]

    async def size(self) -> int:
        """How many items the partition holds."""
        collection = await self.ensure_collection()
        return await collection.count_documents({"partition_id": self._partition_id}, session=self._session)

    async def query(
        self,
        filter: FilterOptions | None = None,
        sort: SortOptions | None = None,
        limit: int = -1,
        offset: int = 0,
    ) -> PaginatedResult[M]:
        """The matching items, sorted (else in insertion order), one page; ``total`` counts every match."""
        collection = await self.ensure_collection()
        query, order = mongo_filter(filter, self._partition_id), self._sort(sort)
        total = await collection.count_documents(query, session=self._session)
        items: list[M] = []
        if limit != 0:
            cursor = collection.find(
                query, sort=order or [("_id", 1)], skip=max(offset, 0), session=self._session
            )
            if limit > 0:
                cursor = cursor.limit(limit)
            items = [self._item(doc) async for doc in cursor]
        return PaginatedResult(items=items, limit=limit, offset=offset, total=total)

    async def get(self, filter: FilterOptions | None = None, sort: SortOptions | None = None) -> M | None:
        """The first matching item in ``sort`` order (else insertion order), or None."""
        collection = await self.ensure_collection()
        query, order = mongo_filter(filter, self._partition_id), self._sort(sort)
        doc = await collection.find_one(query, sort=order or [("_id", 1)], session=self._session)
        return None if doc is None else self._item(doc)

    async def insert(self, items: Sequence[M]) -> None:
        """Insert new items; `DuplicatedPrimaryKeyError` when a primary key is taken (the unique index)."""
        if not items:
            return
        docs = [self._doc(item) for item in items]
        collection = await self.ensure_collection()
        try:
            await collection.insert_many(docs, ordered=True, session=self._session)
        except (DuplicateKeyError, BulkWriteError) as exc:
            errors = (
                getattr(exc, "details", {}).get("writeErrors", []) if isinstance(exc, BulkWriteError) else []
            )
            if isinstance(exc, DuplicateKeyError) or any(e.get("code") == 11000 for e in errors):
                raise DuplicatedPrimaryKeyError(
                    f"Duplicated primary key(s) {self._primary_keys} while inserting into "
                    f"{self._collection_name}"
                ) from exc
            raise

    async def update(self, items: Sequence[M], update_fields: Sequence[str] | None = None) -> list[M]:
        """Replace stored items (only ``update_fields`` when given); `ValueError` if one does not exist."""
        collection = await self.ensure_collection()
        updated: list[M] = []
        for item in items:
            doc = self._doc(item)
            if update_fields is None:
                found = await collection.find_one_and_replace(
                    self._key(doc), doc, return_document=ReturnDocument.AFTER, session=self._session
                )
            else:
                change = {field: doc[field] for field in update_fields if field in doc}
                found = await collection.find_one_and_update(
                    self._key(doc),
                    {"$set": change},
                    return_document=ReturnDocument.AFTER,
                    session=self._session,
                )
            if found is None:
                raise ValueError(f"Item with primary key(s) {self._key(doc)} does not exist")
            updated.append(self._item(found))
        return updated

    async def upsert(self, items: Sequence[M], update_fields: Sequence[str] | None = None) -> list[M]:
        """Insert new items; for existing ones set every field, only ``update_fields``, or none (``[]``).

        Each item is inserted, and updated only if the unique index says its key is taken, so concurrent
        upserts of one key leave one document. Returns the stored items.
        """
        collection = await self.ensure_collection()
        stored: list[M] = []
        for item in items:
            doc = self._doc(item)
            try:
                await collection.insert_one(dict(doc), session=self._session)
                stored.append(self._item(doc))
                continue
            except DuplicateKeyError:
                pass
            fields = list(doc) if update_fields is None else [f for f in update_fields if f in doc]
            change = {"$set": {field: doc[field] for field in fields}} if fields else None
            found = (
                await collection.find_one_and_update(
                    self._key(doc), change, return_document=ReturnDocument.AFTER, session=self._session
                )
                if change
                else await collection.find_one(self._key(doc), session=self._session)
            )
            if found is None:  # deleted between the insert and the update: insert it after all
                await collection.insert_one(dict(doc), session=self._session)
                found = doc
            stored.append(self._item(found))
        return stored

    async def delete(self, items: Sequence[M]) -> None:
        """Remove the items with these primary keys; `ValueError` if one does not exist."""
        collection = await self.ensure_collection()
        for item in items:
            key = self._key(self._doc(item))
            if (await collection.delete_one(key, session=self._session)).deleted_count == 0:
                raise ValueError(f"Item with primary key(s) {key} does not exist")


class MongoBasedQueue(_Sessioned, Queue[T]):
    """A FIFO `Queue` in a MongoDB collection: entries are marked consumed, in insertion order."""

    def __init__(
        self,
        client_pool: MongoClientPool,
        database_name: str,
        collection_name: str,
        partition_id: str,
        item_type: type[T],
        tracker: object | None = None,
    ) -> None:
        Queue.__init__(self, tracker=tracker)
        _Sessioned.__init__(self, client_pool, database_name, collection_name, partition_id)
        self._item_type = item_type
        self._adapter: TypeAdapter[T] = TypeAdapter(item_type)

    @property
    def collection_name(self) -> str:
        """The MongoDB collection's name."""
        return self._collection_name

    def with_session(self, session: AsyncClientSession) -> MongoBasedQueue[T]:
        """The same queue, its operations in ``session`` (a transaction)."""
        bound = MongoBasedQueue(
            self._client_pool, self._database_name, self._collection_name, self._partition_id, self._item_type
        )
        bound._ensured, bound._session = self._ensured, session
        return bound

    async def _indexes(self, collection: AsyncCollection[Any]) -> None:
        await _index(collection, ["partition_id", "consumed"], unique=False)

    def item_type(self) -> type[T]:
        """The type of the queued values."""
        return self._item_type

    def _pending(self) -> dict[str, Any]:
        return {"partition_id": self._partition_id, "consumed": False}

    async def has(self, item: T) -> bool:
        """Whether ``item`` waits in the queue."""
        collection = await self.ensure_collection()
        value = self._adapter.dump_python(item, mode="json")
        return (
            await collection.find_one({**self._pending(), "value": value}, session=self._session) is not None
        )

    async def enqueue(self, items: Sequence[T]) -> Sequence[T]:
        """Append ``items`` in order; returns them."""
        if not items:
            return []
        for item in items:
            if not isinstance(item, self._item_type):
                raise TypeError(
                    f"Expected item of type {self._item_type.__name__}, got {type(item).__name__}"
                )
        docs = [{**self._pending(), "value": self._adapter.dump_python(item, mode="json")} for item in items]
        collection = await self.ensure_collection()
        await collection.insert_many(docs, ordered=True, session=self._session)
        return list(items)

    async def dequeue(self, limit: int = 1) -> Sequence[T]:
        """Take up to ``limit`` items from the head (each take is one atomic server operation)."""
        collection = await self.ensure_collection()
        taken: list[T] = []
        for _ in range(max(limit, 0)):
            doc = await collection.find_one_and_update(
                self._pending(), {"$set": {"consumed": True}}, sort=[("_id", 1)], session=self._session
            )
            if doc is None:
                break
            taken.append(self._adapter.validate_python(doc["value"]))
        return taken

    async def peek(self, limit: int = 1) -> Sequence[T]:
        """Up to ``limit`` items from the head, left in the queue."""
        if limit <= 0:
            return []
        collection = await self.ensure_collection()
        cursor = collection.find(self._pending(), sort=[("_id", 1)], limit=limit, session=self._session)
        return [self._adapter.validate_python(doc["value"]) async for doc in cursor]

    async def size(self) -> int:
        """How many items wait in the queue."""
        collection = await self.ensure_collection()
        return await collection.count_documents(self._pending(), session=self._session)


class MongoBasedKeyValue(_Sessioned, KeyValue[K, V]):
    """A `KeyValue` in a MongoDB collection (one document per key); `inc` and `chmax` are atomic."""

    def __init__(
        self,
        client_pool: MongoClientPool,
        database_name: str,
        collection_name: str,
        partition_id: str,
        key_type: type[K],
        value_type: type[V],
        tracker: object | None = None,
    ) -> None:
        KeyValue.__init__(self, tracker=tracker)
        _Sessioned.__init__(self, client_pool, database_name, collection_name, partition_id)
        self._key_type, self._value_type = key_type, value_type
        self._keys: TypeAdapter[K] = TypeAdapter(key_type)
        self._values: TypeAdapter[V] = TypeAdapter(value_type)

    @property
    def collection_name(self) -> str:
        """The MongoDB collection's name."""
        return self._collection_name

    def with_session(self, session: AsyncClientSession) -> MongoBasedKeyValue[K, V]:
        """The same mapping, its operations in ``session`` (a transaction)."""
        bound = MongoBasedKeyValue(
            self._client_pool,
            self._database_name,
            self._collection_name,
            self._partition_id,
            self._key_type,
            self._value_type,
        )
        bound._ensured, bound._session = self._ensured, session
        return bound

    async def _indexes(self, collection: AsyncCollection[Any]) -> None:
        await _index(collection, ["partition_id", "key"], unique=True)

    def _where(self, key: K) -> dict[str, Any]:
        return {"partition_id": self._partition_id, "key": self._keys.dump_python(key, mode="json")}

    async def has(self, key: K) -> bool:
        """Whether ``key`` is set."""
        collection = await self.ensure_collection()
        return await collection.find_one(self._where(key), session=self._session) is not None

    async def get(self, key: K, default: V | None = None) -> V | None:
        """The value of ``key``, or ``default``."""
        collection = await self.ensure_collection()
        doc = await collection.find_one(self._where(key), session=self._session)
        return default if doc is None else self._values.validate_python(doc["value"])

    async def set(self, key: K, value: V) -> None:
        """Set ``key`` to ``value``."""
        collection = await self.ensure_collection()
        encoded = self._values.dump_python(value, mode="json")
        await collection.update_one(
            self._where(key), {"$set": {"value": encoded}}, upsert=True, session=self._session
        )

    async def _numeric(self, key: K, operator: str, operand: V) -> V:
        collection = await self.ensure_collection()
        encoded = self._values.dump_python(operand, mode="json")
        try:
            doc = await collection.find_one_and_update(
                self._where(key),
                {operator: {"value": encoded}},
                upsert=True,
                return_document=ReturnDocument.AFTER,
                session=self._session,
            )
        except OperationFailure as exc:
            raise TypeError(f"value for key {key!r} is not numeric ({exc})") from exc
        return self._values.validate_python(doc["value"])

    async def inc(self, key: K, amount: V) -> V:
        """Add ``amount`` to the value of ``key`` (0 when unset); returns the new value."""
        ensure_numeric(amount, description="amount")
        return await self._numeric(key, "$inc", amount)

    async def chmax(self, key: K, value: V) -> V:
        """Raise the value of ``key`` to ``value`` if lower (or unset); returns the value kept."""
        ensure_numeric(value, description="value")
        return await self._numeric(key, "$max", value)

    async def pop(self, key: K, default: V | None = None) -> V | None:
        """Remove ``key`` and return its value, or ``default``."""
        collection = await self.ensure_collection()
        doc = await collection.find_one_and_delete(self._where(key), session=self._session)
        return default if doc is None else self._values.validate_python(doc["value"])

    async def size(self) -> int:
        """How many keys are set."""
        collection = await self.ensure_collection()
        return await collection.count_documents({"partition_id": self._partition_id}, session=self._session)


class _ProcessLock:
    """A lock for coroutines of any thread and event loop: waiting yields to the loop in short polls."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        while not self._lock.acquire(blocking=False):
            await asyncio.sleep(_LOCK_POLL_SECONDS)
        try:
            yield
        finally:
            self._lock.release()


class MongoLightningCollections(LightningCollections):
    """The seven containers of a `CollectionBasedLightningStore` in one MongoDB database and partition.

    ``CollectionBasedLightningStore(MongoLightningCollections(MongoClientPool(mongo_uri=...), "agl",
    "run-7"))``. Each container may be passed in; the defaults use 0.3's collection names, primary keys
    and indexes. See the module docstring for what is atomic.
    """

    lock_type = "thread"
    """`atomic()` blocks of this process are serialized across threads and event loops."""

    def __init__(
        self,
        client_pool: MongoClientPool,
        database_name: str,
        partition_id: str,
        rollouts: MongoBasedCollection[Rollout] | None = None,
        attempts: MongoBasedCollection[Attempt] | None = None,
        spans: MongoBasedCollection[Span] | None = None,
        resources: MongoBasedCollection[ResourcesUpdate] | None = None,
        workers: MongoBasedCollection[Worker] | None = None,
        rollout_queue: MongoBasedQueue[str] | None = None,
        span_sequence_ids: MongoBasedKeyValue[str, int] | None = None,
        tracker: object | None = None,
    ) -> None:
        super().__init__(tracker=tracker)
        self._client_pool, self._database_name, self._partition_id = client_pool, database_name, partition_id
        args = (client_pool, database_name)

        def collection(name: str, keys: list[str], model: Any, indexes: list[list[str]]) -> Any:
            return MongoBasedCollection(*args, name, partition_id, keys, model, indexes)

        self._rollouts = rollouts or collection("rollouts", ["rollout_id"], Rollout, [["status"]])
        self._attempts = attempts or collection(
            "attempts", ["rollout_id", "attempt_id"], Attempt, [["status"], ["sequence_id"]]
        )
        self._spans = spans or collection(
            "spans", ["rollout_id", "attempt_id", "span_id"], Span, [["sequence_id"]]
        )
        self._resources = resources or collection(
            "resources", ["resources_id"], ResourcesUpdate, [["update_time"]]
        )
        self._workers = workers or collection("workers", ["worker_id"], Worker, [["status"]])
        self._rollout_queue = rollout_queue or MongoBasedQueue(*args, "rollout_queue", partition_id, str)
        self._span_sequence_ids = span_sequence_ids or MongoBasedKeyValue(
            *args, "span_sequence_ids", partition_id, str, int
        )
        self._lock = _ProcessLock()

    def with_session(self, session: AsyncClientSession) -> MongoLightningCollections:
        """The same collections, every operation in ``session`` (a transaction)."""
        bound = MongoLightningCollections(
            self._client_pool,
            self._database_name,
            self._partition_id,
            rollouts=self._rollouts.with_session(session),
            attempts=self._attempts.with_session(session),
            spans=self._spans.with_session(session),
            resources=self._resources.with_session(session),
            workers=self._workers.with_session(session),
            rollout_queue=self._rollout_queue.with_session(session),
            span_sequence_ids=self._span_sequence_ids.with_session(session),
        )
        bound._lock = self._lock
        return bound

    @property
    def rollouts(self) -> MongoBasedCollection[Rollout]:
        """The rollouts (without their attempts)."""
        return self._rollouts

    @property
    def attempts(self) -> MongoBasedCollection[Attempt]:
        """The attempts of every rollout."""
        return self._attempts

    @property
    def spans(self) -> MongoBasedCollection[Span]:
        """The spans of every attempt."""
        return self._spans

    @property
    def resources(self) -> MongoBasedCollection[ResourcesUpdate]:
        """The versioned resources snapshots."""
        return self._resources

    @property
    def workers(self) -> MongoBasedCollection[Worker]:
        """The workers seen by the store."""
        return self._workers

    @property
    def rollout_queue(self) -> MongoBasedQueue[str]:
        """Ids of the rollouts waiting to be dequeued, oldest first."""
        return self._rollout_queue

    @property
    def span_sequence_ids(self) -> MongoBasedKeyValue[str, int]:
        """Per rollout id, the last span sequence id issued or seen."""
        return self._span_sequence_ids

    @contextlib.asynccontextmanager
    async def atomic(  # type: ignore[override]
        self,
        *,
        mode: AtomicMode = "rw",
        snapshot: bool = False,
        commit: bool = False,
        labels: Sequence[AtomicLabels] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[MongoLightningCollections]:
        """A block serialized with this process's other blocks (``commit=True``: use `execute`)."""
        if commit:
            raise ValueError("atomic(commit=True) is not supported; use execute(callback, commit=True).")
        async with self._lock.held():
            yield self

    async def execute(
        self,
        callback: Callable[[Any], Awaitable[T]],
        *,
        mode: AtomicMode = "rw",
        snapshot: bool = False,
        commit: bool = False,
        labels: Sequence[AtomicLabels] | None = None,
        **kwargs: Any,
    ) -> T:
        """``callback(collections)`` in an `atomic` block, or with ``commit=True`` in a transaction.

        A transaction needs a replica set; pymongo retries it on transient errors and unknown commit
        results. ``snapshot`` asks for snapshot reads, ``mode="r"`` for no majority write concern.
        """
        if not commit:
            async with self.atomic(mode=mode, snapshot=snapshot, labels=labels) as collections:
                return await callback(collections)
        client = await self._client_pool.get_client()
        read_concern = ReadConcern("snapshot" if snapshot else "local")
        write_concern = WriteConcern("majority") if mode != "r" else None
        async with self._lock.held(), client.start_session() as session:

            async def run(session: AsyncClientSession) -> T:
                return await callback(self.with_session(session))

            return await session.with_transaction(
                run,
                read_concern=read_concern,
                write_concern=write_concern,
                read_preference=ReadPreference.PRIMARY,
            )


def _is_pymongo(exc: BaseException, class_name: str) -> bool:
    return any(
        cls.__name__ == class_name and cls.__module__.startswith("pymongo") for cls in type(exc).__mro__
    )


def resolve_mongo_error_type(exc: BaseException | None) -> str | None:
    """The metrics label of a pymongo error (``-Transient`` for transient transaction errors), else None.

    Matches the error's classes by name and module, so any pymongo version's errors are recognised.
    """
    if exc is None or not _is_pymongo(exc, "PyMongoError"):
        return None
    has_label = getattr(exc, "has_error_label", None)
    suffix = "-Transient" if callable(has_label) and has_label("TransientTransactionError") else ""
    if _is_pymongo(exc, "OperationFailure"):
        return f"OperationFailure-{getattr(exc, 'code', None)}{suffix}"
    return f"{type(exc).__name__}{suffix}"
