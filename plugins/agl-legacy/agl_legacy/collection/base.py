"""The collections a `CollectionBasedLightningStore` keeps its state in (Agent Lightning 0.3's storage layer).

A `LightningCollections` bundles seven containers: five `Collection`s of models keyed by primary keys
(rollouts, attempts, spans, resources, workers), the rollout `Queue` and the span sequence-id `KeyValue`
counter, plus `atomic()`, the context in which a store method reads and writes them as one step. A backend
implements these interfaces (agl ships the in-memory one, `agl_legacy.collection.memory`) and the store
logic in `agl_legacy.collection_based` does the rest. Queries take the same `FilterOptions` and
`SortOptions` as everywhere in agl.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping, Sequence
from numbers import Real
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeGuard, TypeVar, cast

from agl_core.types import FilterField, FilterOptions, PaginatedResult, SortOptions

if TYPE_CHECKING:
    from agl_core.types import Attempt, ResourcesUpdate, Rollout, Span, Worker

__all__ = [
    "AtomicLabels",
    "AtomicMode",
    "Collection",
    "DuplicatedPrimaryKeyError",
    "FilterMap",
    "KeyValue",
    "LightningCollections",
    "Queue",
    "TrackedCollection",
    "ensure_numeric",
    "merge_must_filters",
    "normalize_filter_options",
    "resolve_error_type",
    "resolve_sort_options",
    "tracked",
]

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])

AtomicMode = Literal["r", "w", "rw"]
"""What an atomic block does with the collections: read, write or both."""

AtomicLabels = Literal[
    "rollouts", "attempts", "spans", "resources", "workers", "rollout_queue", "span_sequence_ids", "generic"
]
"""The collections an atomic block touches (``generic``: none in particular)."""

FilterMap = Mapping[str, FilterField]
"""Field name -> operators, the normalized form of a `FilterOptions` without its special keys."""


def resolve_error_type(exc: BaseException | None) -> str:
    """The label of an error in collection metrics: its class name, or ``"N/A"`` for no error."""
    return "N/A" if exc is None else type(exc).__name__


def ensure_numeric(value: Any, *, description: str) -> TypeGuard[Real]:
    """True for a real number; `TypeError` naming ``description`` otherwise (booleans are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{description} must be numeric; got {type(value).__name__}")
    return True


class DuplicatedPrimaryKeyError(ValueError):
    """An insert found an item with the same primary key already in the collection."""


class TrackedCollection:
    """A container that can report per-operation metrics to a tracker.

    agl stores report through `LightningStore.statistics()`; ``tracker`` must be None (0.3's metrics
    backends are not part of agl).
    """

    def __init__(self, tracker: object | None = None) -> None:
        if tracker is not None:
            raise ValueError(
                f"{type(self).__name__}(tracker=...) is not supported in agl: read the store's statistics() "
                "or use agl_core.metrics instead (see docs/migrating-from-agent-lightning.md)."
            )
        self._tracker = None

    @property
    def tracker(self) -> None:
        """The metrics tracker: always None in agl."""
        return self._tracker

    @property
    def collection_name(self) -> str:
        """The name this container reports under (its class name unless a subclass says otherwise)."""
        return type(self).__name__

    @property
    def extra_tracking_labels(self) -> Mapping[str, Any]:
        """Extra metric labels of this container (none)."""
        return {}

    @contextlib.asynccontextmanager
    async def tracking_context(self, operation: str, collection: str) -> AsyncIterator[None]:
        """The block around one tracked operation (records nothing without a tracker)."""
        yield


def tracked(operation: str) -> Callable[[_F], _F]:
    """Decorate a `TrackedCollection` coroutine method so it runs inside `tracking_context(operation)`."""

    def decorator(func: _F) -> _F:
        @functools.wraps(func)
        async def wrapper(self: TrackedCollection, *args: Any, **kwargs: Any) -> Any:
            async with self.tracking_context(operation, self.collection_name):
                return await func(self, *args, **kwargs)

        return cast(_F, wrapper)

    return decorator


class Collection(TrackedCollection, Generic[T]):
    """Models keyed by their primary-key fields, with filtered, sorted, paginated queries."""

    def primary_keys(self) -> Sequence[str]:
        """The fields that identify an item, outermost first."""
        raise NotImplementedError

    def item_type(self) -> type[T]:
        """The model class of the items."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__}[{self.item_type().__name__}]>"

    async def size(self) -> int:
        """How many items the collection holds."""
        raise NotImplementedError

    async def query(
        self,
        filter: FilterOptions | None = None,
        sort: SortOptions | None = None,
        limit: int = -1,
        offset: int = 0,
    ) -> PaginatedResult[T]:
        """The items matching ``filter``, sorted by ``sort`` (else insertion order), one page of them.

        ``limit=-1`` means no limit; ``total`` of the result counts every match.
        """
        raise NotImplementedError

    async def get(self, filter: FilterOptions | None = None, sort: SortOptions | None = None) -> T | None:
        """The first item matching ``filter`` in ``sort`` order, or None."""
        raise NotImplementedError

    async def insert(self, items: Sequence[T]) -> None:
        """Add new items; `DuplicatedPrimaryKeyError` if a primary key is taken (nothing is added then)."""
        raise NotImplementedError

    async def update(self, items: Sequence[T], update_fields: Sequence[str] | None = None) -> Sequence[T]:
        """Replace stored items (only ``update_fields`` when given); `ValueError` if one does not exist.

        Returns the stored items after the update.
        """
        raise NotImplementedError

    async def upsert(self, items: Sequence[T], update_fields: Sequence[str] | None = None) -> Sequence[T]:
        """Insert new items; for existing ones replace all fields, only ``update_fields``, or none (``[]``).

        Returns the stored items.
        """
        raise NotImplementedError

    async def delete(self, items: Sequence[T]) -> None:
        """Remove the items with these primary keys; `ValueError` if one does not exist."""
        raise NotImplementedError


class Queue(TrackedCollection, Generic[T]):
    """A FIFO queue: append at the tail, take from the head."""

    def item_type(self) -> type[T]:
        """The type of the queued values."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__}[{self.item_type().__name__}]>"

    async def has(self, item: T) -> bool:
        """Whether ``item`` is in the queue."""
        raise NotImplementedError

    async def enqueue(self, items: Sequence[T]) -> Sequence[T]:
        """Append ``items`` in order; returns them."""
        raise NotImplementedError

    async def dequeue(self, limit: int = 1) -> Sequence[T]:
        """Remove and return up to ``limit`` items from the head (none for ``limit <= 0``)."""
        raise NotImplementedError

    async def peek(self, limit: int = 1) -> Sequence[T]:
        """Up to ``limit`` items from the head, left in the queue."""
        raise NotImplementedError

    async def size(self) -> int:
        """How many items are queued."""
        raise NotImplementedError


class KeyValue(TrackedCollection, Generic[K, V]):
    """A mapping with atomic numeric updates (used as per-rollout counters)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"

    async def has(self, key: K) -> bool:
        """Whether ``key`` is set."""
        raise NotImplementedError

    async def get(self, key: K, default: V | None = None) -> V | None:
        """The value of ``key``, or ``default``."""
        raise NotImplementedError

    async def set(self, key: K, value: V) -> None:
        """Set ``key`` to ``value``."""
        raise NotImplementedError

    async def inc(self, key: K, amount: V) -> V:
        """Add ``amount`` to the value of ``key`` (0 when unset) and return the new value."""
        raise NotImplementedError

    async def chmax(self, key: K, value: V) -> V:
        """Raise the value of ``key`` to ``value`` if it is lower (or unset); return the value kept."""
        raise NotImplementedError

    async def pop(self, key: K, default: V | None = None) -> V | None:
        """Remove ``key`` and return its value, or ``default``."""
        raise NotImplementedError

    async def size(self) -> int:
        """How many keys are set."""
        raise NotImplementedError


class LightningCollections(TrackedCollection):
    """Everything a collection-based store keeps: five collections, the rollout queue, the sequence ids.

    Primary keys: rollouts ``rollout_id``; attempts ``(rollout_id, attempt_id)``; spans ``(rollout_id,
    attempt_id, span_id)``; resources ``resources_id``; workers ``worker_id``.
    """

    def __init__(self, tracker: object | None = None, extra_labels: Sequence[str] | None = None) -> None:
        super().__init__(tracker=tracker)

    @property
    def rollouts(self) -> Collection[Rollout]:
        """The rollouts (without their attempts)."""
        raise NotImplementedError

    @property
    def attempts(self) -> Collection[Attempt]:
        """The attempts of every rollout."""
        raise NotImplementedError

    @property
    def spans(self) -> Collection[Span]:
        """The spans of every attempt."""
        raise NotImplementedError

    @property
    def resources(self) -> Collection[ResourcesUpdate]:
        """The versioned resources snapshots."""
        raise NotImplementedError

    @property
    def workers(self) -> Collection[Worker]:
        """The workers seen by the store."""
        raise NotImplementedError

    @property
    def rollout_queue(self) -> Queue[str]:
        """Ids of the rollouts waiting to be dequeued, oldest first."""
        raise NotImplementedError

    @property
    def span_sequence_ids(self) -> KeyValue[str, int]:
        """Per rollout id, the last span sequence id issued or seen."""
        raise NotImplementedError

    def atomic(
        self,
        *,
        mode: AtomicMode = "rw",
        snapshot: bool = False,
        commit: bool = False,
        labels: Sequence[AtomicLabels] | None = None,
        **kwargs: Any,
    ) -> contextlib.AbstractAsyncContextManager[Any]:
        """A block in which reads and writes of the collections happen as one step for other callers.

        ``mode``, ``snapshot``, ``commit`` and ``labels`` describe the block; what each guarantees
        depends on the backend.
        """
        raise NotImplementedError

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
        """Run ``callback(collections)`` inside `atomic()` and return its result."""
        async with self.atomic(mode=mode, snapshot=snapshot, commit=commit, labels=labels, **kwargs) as bound:
            return await callback(bound)


def merge_must_filters(target: MutableMapping[str, FilterField], definition: Any) -> None:
    """Add a ``_must`` group (a mapping, or a sequence of mappings) to ``target``, field by field.

    Raises `TypeError` for a bad shape and `ValueError` for the same operator twice on one field.
    """
    if definition is None:
        return
    if isinstance(definition, Mapping):
        entries: list[Mapping[str, Any]] = [definition]
    elif isinstance(definition, Sequence) and not isinstance(definition, (str, bytes)):
        entries = []
        for entry in definition:
            if not isinstance(entry, Mapping):
                raise TypeError("Each `_must` entry must be a mapping of field names to operators")
            entries.append(entry)
    else:
        raise TypeError("`_must` filters must be a mapping or a sequence of mappings")
    for entry in entries:
        for field, ops in entry.items():
            merged: dict[str, Any] = dict(target.get(field, {}))
            for op, expected in ops.items():
                if op in merged:
                    raise ValueError(f"Duplicate operator '{op}' for field '{field}' in must filters")
                merged[op] = expected
            target[field] = cast(FilterField, merged)


def normalize_filter_options(
    filter_options: FilterOptions | None,
) -> tuple[FilterMap | None, FilterMap | None, Literal["and", "or"]]:
    """Split `FilterOptions` into (field conditions, ``_must`` conditions, aggregate); None when empty."""
    if not filter_options:
        return None, None, "and"
    aggregate = filter_options.get("_aggregate", "and")
    if aggregate not in ("and", "or"):
        raise ValueError(f"Unsupported filter aggregate '{aggregate}'")
    normalized: dict[str, FilterField] = {}
    must: dict[str, FilterField] = {}
    for field, ops in filter_options.items():
        if field == "_aggregate":
            continue
        if field == "_must":
            merge_must_filters(must, ops)
        else:
            normalized[field] = cast(FilterField, dict(cast(Mapping[str, Any], ops)))
    return normalized or None, must or None, aggregate


def resolve_sort_options(sort: SortOptions | None) -> tuple[str | None, Literal["asc", "desc"]]:
    """``(field, order)`` of `SortOptions`; ``(None, "asc")`` for no sort."""
    if not sort:
        return None, "asc"
    name = sort.get("name")
    if not name:
        raise ValueError("Sort options must include a 'name' field")
    order = sort.get("order", "asc")
    if order not in ("asc", "desc"):
        raise ValueError(f"Unsupported sort order '{order}'")
    return name, order
