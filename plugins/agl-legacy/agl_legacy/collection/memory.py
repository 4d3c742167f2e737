"""In-memory collections: dicts and a deque behind one lock (Agent Lightning 0.3's storage layer).

`InMemoryLightningCollections` is what `CollectionBasedLightningStore` runs on when nothing else is given.
Its `atomic()` block holds one lock for the whole set of collections: with ``lock_type="thread"`` (the
default) a lock that is safe across threads and event loops, with ``lock_type="asyncio"`` one
`asyncio.Lock` per event loop (one thread only). The containers themselves do no locking: use them inside
`atomic()`. Stored items are kept as given; an update stores a copy with the changed fields.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
import weakref
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, TypeVar

from agl_core.store.logic import (
    build_predicate,
    normalize_filter,
    paginate,
    sort_key_for,
    validate_pagination,
)
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
from agl_legacy.collection.base import (
    AtomicLabels,
    AtomicMode,
    Collection,
    DuplicatedPrimaryKeyError,
    KeyValue,
    LightningCollections,
    Queue,
    ensure_numeric,
    resolve_sort_options,
)

__all__ = [
    "DequeBasedQueue",
    "DictBasedKeyValue",
    "InMemoryLightningCollections",
    "ListBasedCollection",
    "ListBasedCollectionItemType",
    "MutationMode",
]

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")

ListBasedCollectionItemType: TypeAlias = dict[Any, dict[tuple[Any, ...], Any]]
"""The storage of a `ListBasedCollection`: first primary-key value -> (other key values) -> item."""

MutationMode = Literal["insert", "update", "upsert", "delete"]
"""The four ways a `ListBasedCollection` write treats an existing or missing primary key."""

_POLL_START_S = 0.0005
_POLL_MAX_S = 0.005


class ListBasedCollection(Collection[T]):
    """A `Collection` in dicts: O(1) access by primary key, queries narrowed by the first key's value.

    Without a sort, queries return items in insertion order (grouped by the first primary key's value).
    Sorting uses agl's rules: a ``*_time`` field puts None last ascending; other None values sort as the
    field type's zero.

    Args:
        items: Items to start with.
        item_type: The model class of the items (not a dict).
        primary_keys: The fields that identify an item, outermost first.
        id: The collection's name (a random one if omitted).
        tracker: Must be None (see `TrackedCollection`).
    """

    def __init__(
        self,
        items: Sequence[T] | None,
        item_type: type[T],
        primary_keys: Sequence[str],
        id: str | None = None,
        tracker: object | None = None,
    ) -> None:
        super().__init__(tracker=tracker)
        if not primary_keys:
            raise ValueError("primary_keys must be non-empty")
        if isinstance(item_type, type) and issubclass(item_type, dict):
            raise TypeError(f"Expect item to be not a dict, got {item_type.__name__}")
        self._id = id if id is not None else str(uuid.uuid4())
        self._item_type = item_type
        self._primary_keys = tuple(primary_keys)
        self._items: ListBasedCollectionItemType = {}
        self._size = 0
        for item in items or ():
            self._write(item, "insert", None)

    @property
    def collection_name(self) -> str:
        """The collection's ``id``."""
        return self._id

    def primary_keys(self) -> Sequence[str]:
        """The fields that identify an item, outermost first."""
        return self._primary_keys

    def item_type(self) -> type[T]:
        """The model class of the items."""
        return self._item_type

    async def size(self) -> int:
        """How many items the collection holds."""
        return self._size

    def _key(self, item: T) -> tuple[Any, tuple[Any, ...]]:
        if not isinstance(item, self._item_type):
            raise TypeError(
                f"{self._id} holds {self._item_type.__name__} items, got {type(item).__name__}: {item!r}"
            )
        values = tuple(getattr(item, name) for name in self._primary_keys)
        return values[0], values[1:]

    def _write(self, item: T, mode: MutationMode, update_fields: Sequence[str] | None) -> T | None:
        first, rest = self._key(item)
        bucket = self._items.get(first)
        existing: T | None = None if bucket is None else bucket.get(rest)
        if existing is None:
            if mode in ("update", "delete"):
                raise ValueError(f"No item with primary key {(first, *rest)!r} in {self._id}")
            if bucket is None:
                bucket = self._items[first] = {}
            bucket[rest] = item
            self._size += 1
            return item
        if mode == "insert":
            raise DuplicatedPrimaryKeyError(
                f"An item with primary key {(first, *rest)!r} is already in {self._id}"
            )
        assert bucket is not None  # `existing` came from it
        if mode == "delete":
            del bucket[rest]
            if not bucket:
                del self._items[first]
            self._size -= 1
            return None
        if update_fields is None:
            stored = item
        elif not update_fields:
            return existing
        else:
            # items are pydantic models, but T is unbounded (as in Agent Lightning 0.3's collections)
            stored = existing.model_copy(update={f: getattr(item, f) for f in update_fields})  # type: ignore[attr-defined]
        bucket[rest] = stored
        return stored

    def _candidates(self, filter: FilterOptions | None) -> Iterable[T]:
        normalized = normalize_filter(filter)
        predicate = build_predicate(normalized)
        firsts = set(normalized.required_exact(self._primary_keys[0]))
        if len(firsts) > 1:
            return ()
        if firsts:
            bucket = self._items.get(next(iter(firsts)))
            if bucket is None:
                return ()
            rest_keys = self._primary_keys[1:]
            wanted = [normalized.required_exact(name) for name in rest_keys]
            if rest_keys and all(len(set(values)) == 1 for values in wanted):
                found = bucket.get(tuple(values[0] for values in wanted))
                return () if found is None or not predicate(found) else (found,)
            return [item for item in bucket.values() if predicate(item)]
        return [item for bucket in self._items.values() for item in bucket.values() if predicate(item)]

    def _sorted(self, items: Iterable[T], sort: SortOptions | None) -> list[T]:
        name, order = resolve_sort_options(sort)
        if name is None:
            return list(items)
        return sorted(items, key=sort_key_for(name, self._item_type), reverse=order == "desc")

    async def query(
        self,
        filter: FilterOptions | None = None,
        sort: SortOptions | None = None,
        limit: int = -1,
        offset: int = 0,
    ) -> PaginatedResult[T]:
        """The matching items, sorted, one page (see `Collection.query`)."""
        validate_pagination(limit, offset)
        return paginate(self._sorted(self._candidates(filter), sort), limit, offset)

    async def get(self, filter: FilterOptions | None = None, sort: SortOptions | None = None) -> T | None:
        """The first matching item in ``sort`` order, or None."""
        matched = self._candidates(filter)
        if sort is None:
            return next(iter(matched), None)
        name, order = resolve_sort_options(sort)
        key = sort_key_for(name, self._item_type)  # type: ignore[arg-type]
        items = list(matched)
        if not items:
            return None
        return max(items, key=key) if order == "desc" else min(items, key=key)

    async def insert(self, items: Sequence[T]) -> None:
        """Add new items; nothing is added if any primary key is taken (or repeated in ``items``)."""
        seen: set[tuple[Any, tuple[Any, ...]]] = set()
        for item in items:
            first, rest = key = self._key(item)
            if key in seen or rest in self._items.get(first, {}):
                raise DuplicatedPrimaryKeyError(
                    f"An item with primary key {(first, *rest)!r} is already in {self._id}"
                )
            seen.add(key)
        for item in items:
            self._write(item, "insert", None)

    async def update(self, items: Sequence[T], update_fields: Sequence[str] | None = None) -> Sequence[T]:
        """Replace existing items (only ``update_fields`` when given); `ValueError` for a missing one."""
        for item in items:
            first, rest = self._key(item)
            if rest not in self._items.get(first, {}):
                raise ValueError(f"No item with primary key {(first, *rest)!r} in {self._id}")
        return [self._write(item, "update", update_fields) for item in items]  # type: ignore[misc]

    async def upsert(self, items: Sequence[T], update_fields: Sequence[str] | None = None) -> Sequence[T]:
        """Insert new items, update existing ones (see `Collection.upsert`)."""
        return [self._write(item, "upsert", update_fields) for item in items]  # type: ignore[misc]

    async def delete(self, items: Sequence[T]) -> None:
        """Remove the items with these primary keys; `ValueError` (nothing removed) for a missing one."""
        for item in items:
            first, rest = self._key(item)
            if rest not in self._items.get(first, {}):
                raise ValueError(f"No item with primary key {(first, *rest)!r} in {self._id}")
        for item in items:
            self._write(item, "delete", None)


class DequeBasedQueue(Queue[T]):
    """A `Queue` on a `collections.deque` (O(1) enqueue and dequeue)."""

    def __init__(
        self,
        item_type: type[T],
        items: Sequence[T] | None = None,
        id: str | None = None,
        tracker: object | None = None,
    ) -> None:
        super().__init__(tracker=tracker)
        self._item_type = item_type
        self._id = id if id is not None else str(uuid.uuid4())
        self._items: deque[T] = deque(items or ())

    @property
    def collection_name(self) -> str:
        """The queue's ``id``."""
        return self._id

    def item_type(self) -> type[T]:
        """The type of the queued values."""
        return self._item_type

    async def has(self, item: T) -> bool:
        """Whether ``item`` is queued (a scan of the queue)."""
        return item in self._items

    async def enqueue(self, items: Sequence[T]) -> Sequence[T]:
        """Append ``items`` in order."""
        for item in items:
            if not isinstance(item, self._item_type):
                raise TypeError(f"{self._id} holds {self._item_type.__name__} values, got {item!r}")
        self._items.extend(items)
        return list(items)

    async def dequeue(self, limit: int = 1) -> Sequence[T]:
        """Remove and return up to ``limit`` values from the head."""
        taken: list[T] = []
        while self._items and len(taken) < limit:
            taken.append(self._items.popleft())
        return taken

    async def peek(self, limit: int = 1) -> Sequence[T]:
        """Up to ``limit`` values from the head, left queued."""
        return list(self._items)[: max(limit, 0)]

    async def size(self) -> int:
        """How many values are queued."""
        return len(self._items)


class DictBasedKeyValue(KeyValue[K, V]):
    """A `KeyValue` on a plain dict."""

    def __init__(
        self, data: Mapping[K, V] | None = None, id: str | None = None, tracker: object | None = None
    ) -> None:
        super().__init__(tracker=tracker)
        self._values: dict[K, V] = dict(data or {})
        self._id = id if id is not None else str(uuid.uuid4())

    @property
    def collection_name(self) -> str:
        """The mapping's ``id``."""
        return self._id

    async def has(self, key: K) -> bool:
        """Whether ``key`` is set."""
        return key in self._values

    async def get(self, key: K, default: V | None = None) -> V | None:
        """The value of ``key``, or ``default``."""
        return self._values.get(key, default)

    async def set(self, key: K, value: V) -> None:
        """Set ``key`` to ``value``."""
        self._values[key] = value

    async def inc(self, key: K, amount: V) -> V:
        """Add ``amount`` (a number) to the value of ``key`` (0 when unset); return the new value."""
        ensure_numeric(amount, description="amount")
        current: Any = self._values.get(key, 0)  # a number: ensure_numeric checks what is added
        value: V = current + amount
        self._values[key] = value
        return value

    async def chmax(self, key: K, value: V) -> V:
        """Keep the larger of the stored value and ``value`` (a number); return it."""
        ensure_numeric(value, description="value")
        current = self._values.get(key)
        if current is None or current < value:  # type: ignore[operator]
            self._values[key] = value
            return value
        return current

    async def pop(self, key: K, default: V | None = None) -> V | None:
        """Remove ``key`` and return its value, or ``default``."""
        return self._values.pop(key, default)

    async def size(self) -> int:
        """How many keys are set."""
        return len(self._values)


class _ThreadLock:
    """A lock for coroutines of any thread and event loop; waiting yields to the loop (short polls)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    async def acquire(self) -> None:
        delay = _POLL_START_S
        while not self._lock.acquire(blocking=False):
            await asyncio.sleep(delay)
            delay = min(delay * 2, _POLL_MAX_S)

    def release(self) -> None:
        self._lock.release()


class _LoopLock:
    """One `asyncio.Lock` per event loop: for one thread, any number of tasks."""

    def __init__(self) -> None:
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def _current(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    async def acquire(self) -> None:
        await self._current().acquire()

    def release(self) -> None:
        self._current().release()


class InMemoryLightningCollections(LightningCollections):
    """The seven containers of a store in memory, with one lock for `atomic()` blocks.

    Args:
        lock_type: ``"thread"`` (default): safe for many threads and event loops; ``"asyncio"``: one
            `asyncio.Lock` per loop, for a store used from one thread.
        tracker: Must be None (see `TrackedCollection`).
    """

    def __init__(
        self, lock_type: Literal["thread", "asyncio"] = "thread", tracker: object | None = None
    ) -> None:
        super().__init__(tracker=tracker)
        if lock_type not in ("thread", "asyncio"):
            raise ValueError(f"lock_type must be 'thread' or 'asyncio', got {lock_type!r}")
        self.lock_type: Literal["thread", "asyncio"] = lock_type
        self._lock: _ThreadLock | _LoopLock = _ThreadLock() if lock_type == "thread" else _LoopLock()
        self._rollouts = ListBasedCollection([], Rollout, ["rollout_id"], id="rollouts")
        self._attempts = ListBasedCollection([], Attempt, ["rollout_id", "attempt_id"], id="attempts")
        self._spans = ListBasedCollection([], Span, ["rollout_id", "attempt_id", "span_id"], id="spans")
        self._resources = ListBasedCollection([], ResourcesUpdate, ["resources_id"], id="resources")
        self._workers = ListBasedCollection([], Worker, ["worker_id"], id="workers")
        self._rollout_queue = DequeBasedQueue(str, id="rollout_queue")
        self._span_sequence_ids: DictBasedKeyValue[str, int] = DictBasedKeyValue(id="span_sequence_ids")

    @property
    def collection_name(self) -> str:
        """``"router"``, as in Agent Lightning 0.3."""
        return "router"

    @property
    def rollouts(self) -> ListBasedCollection[Rollout]:
        """The rollouts."""
        return self._rollouts

    @property
    def attempts(self) -> ListBasedCollection[Attempt]:
        """The attempts."""
        return self._attempts

    @property
    def spans(self) -> ListBasedCollection[Span]:
        """The spans."""
        return self._spans

    @property
    def resources(self) -> ListBasedCollection[ResourcesUpdate]:
        """The resources snapshots."""
        return self._resources

    @property
    def workers(self) -> ListBasedCollection[Worker]:
        """The workers."""
        return self._workers

    @property
    def rollout_queue(self) -> DequeBasedQueue[str]:
        """The rollout queue."""
        return self._rollout_queue

    @property
    def span_sequence_ids(self) -> DictBasedKeyValue[str, int]:
        """The span sequence-id counters."""
        return self._span_sequence_ids

    @contextlib.asynccontextmanager
    async def atomic(
        self,
        *,
        mode: AtomicMode = "rw",
        snapshot: bool = False,
        commit: bool = False,
        labels: Sequence[AtomicLabels] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[InMemoryLightningCollections]:
        """Hold the collections' lock for the block (every mode: reads see no half-done write).

        Not re-entrant. No rollback: a block that fails half-way keeps the writes it made.
        """
        await self._lock.acquire()
        try:
            yield self
        finally:
            self._lock.release()

    async def evict_spans_for_rollout(self, rollout_id: str) -> None:
        """Drop every span of ``rollout_id`` (call inside `atomic()`)."""
        removed = self._spans._items.pop(rollout_id, {})
        self._spans._size -= len(removed)
