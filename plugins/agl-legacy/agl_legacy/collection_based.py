"""`CollectionBasedLightningStore`: the `LightningStore` contract over pluggable `LightningCollections`.

Agent Lightning 0.3's store design, kept for 0.3 code that builds stores this way: the state lives in
the seven containers of a `LightningCollections` (rollouts, attempts, spans, resources, workers, the
rollout queue, span sequence ids) and every store method is one `collections.atomic()` block that reads
and writes them. The rules (statuses, retries, watchdog, workers, filters, sorting, pagination) are agl's
shared store toolkit, `agl_core.store.logic`, so this store behaves like every other agl store (it passes
`agl_testing.store_conformance`). Bring other storage by implementing
`agl_legacy.collection.LightningCollections`; without one, the store runs on
`InMemoryLightningCollections`. For speed, agl's own `InMemoryLightningStore` and `SqliteLightningStore`
are the better choice.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Generic, Literal, TypeVar, cast

from pydantic import ValidationError

from agl_core.store.base import (
    UNSET,
    LightningStore,
    LightningStoreCapabilities,
    LightningStoreStatistics,
    Unset,
)
from agl_core.store.errors import (
    AttemptNotFoundError,
    InvalidRequestError,
    RolloutNotFoundError,
    StoreClosedError,
)
from agl_core.store.logic import (
    NormalizedFilter,
    apply_worker_updates,
    attempt_end_time_for,
    build_predicate,
    check_enqueue_requests,
    check_id,
    check_int_bound,
    check_json_value,
    check_optional_number,
    check_optional_str,
    check_rollout_ids,
    check_timeout,
    heartbeat_transition,
    new_attempt_id,
    new_resources_id,
    new_rollout_id,
    next_rollout_status_after_attempt_update,
    number_span,
    paginate,
    plan_sequence_ids,
    resolve_rollout_query_aliases,
    resources_query_filter,
    rollout_changes,
    rollout_end_time_for,
    rollout_query_filter,
    scan_unhealthy,
    sort_key_for,
    span_query_filter,
    validate_attempt_status,
    validate_filter_logic,
    validate_mode,
    validate_pagination,
    validate_sort_order,
    validate_span,
    validate_statuses,
    worker_query_filter,
    worker_sync_required,
    worker_updates_for_attempt,
    worker_updates_for_empty_dequeue,
    worker_updates_for_heartbeat,
)
from agl_core.store.logic.waiters import WaiterRegistry
from agl_core.types import (
    Attempt,
    AttemptedRollout,
    AttemptStatus,
    EnqueueRolloutRequest,
    FilterOptions,
    NamedResources,
    PaginatedResult,
    ResourcesUpdate,
    Rollout,
    RolloutConfig,
    RolloutMode,
    RolloutStatus,
    SortOptions,
    Span,
    Worker,
    WorkerStatus,
)
from agl_core.types.status import (
    FINISHED_ROLLOUT_STATUSES,
    QUEUING_ROLLOUT_STATUSES,
    RUNNING_ROLLOUT_STATUSES,
)
from agl_legacy.collection.base import LightningCollections
from agl_legacy.collection.memory import InMemoryLightningCollections
from agl_legacy.store import LightningStore03

__all__ = [
    "COLLECTION_STORE_ALL_METHODS",
    "COLLECTION_STORE_PUBLIC_METHODS",
    "CollectionBasedLightningStore",
    "get_current_store_methods",
    "healthcheck_before",
    "tracked",
]

T_collections = TypeVar("T_collections", bound=LightningCollections)
_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])

_UNKNOWN_METHOD = "unknown"
_public_method: contextvars.ContextVar[str] = contextvars.ContextVar(
    "agl_store_public_method", default=_UNKNOWN_METHOD
)
_private_method: contextvars.ContextVar[str] = contextvars.ContextVar(
    "agl_store_private_method", default=_UNKNOWN_METHOD
)
_WAIT_POLL_MAX_S = 1.0
_BY_SEQUENCE: SortOptions = {"name": "sequence_id", "order": "asc"}
_LATEST_FIRST: SortOptions = {"name": "sequence_id", "order": "desc"}


def tracked(name: str) -> Callable[[_F], _F]:
    """Decorate a store coroutine method so `get_current_store_methods()` names it while it runs.

    The outermost decorated method counts as the public one, the innermost as the private one.
    """

    def decorator(func: _F) -> _F:
        @functools.wraps(func)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            public_token = _public_method.set(name) if _public_method.get() == _UNKNOWN_METHOD else None
            private_token = _private_method.set(name)
            try:
                return await func(*args, **kwargs)
            finally:
                _private_method.reset(private_token)
                if public_token is not None:
                    _public_method.reset(public_token)

        return cast(_F, wrapper)

    return decorator


def get_current_store_methods() -> tuple[str, str]:
    """``(public, private)`` names of the `tracked` store methods running in this context."""
    return _public_method.get(), _private_method.get()


def healthcheck_before(func: _F) -> _F:
    """Decorate a `CollectionBasedLightningStore` method to run the (debounced) watchdog before it."""

    @functools.wraps(func)
    async def wrapper(self: CollectionBasedLightningStore[Any], *args: Any, **kwargs: Any) -> Any:
        await self._scan_for_unhealthy_rollouts()
        return await func(self, *args, **kwargs)

    return cast(_F, wrapper)


def _config(config: object) -> RolloutConfig:
    if config is None:
        return RolloutConfig()
    if isinstance(config, RolloutConfig):
        return config.model_copy(deep=True)
    if isinstance(config, Mapping):
        try:
            return RolloutConfig.model_validate(config)
        except ValidationError as exc:
            raise InvalidRequestError(f"Invalid rollout config {dict(config)!r}: {exc}") from None
    raise InvalidRequestError(
        f"config must be a RolloutConfig (or a dict of its fields), got {type(config).__name__} {config!r}."
    )


def _metadata(value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        check_json_value("metadata", value)
        return dict(value)
    raise InvalidRequestError(f"metadata must be a dict or None, got {type(value).__name__} {value!r}.")


def _id_filter(field: str, value: str) -> FilterOptions:
    return {field: {"exact": check_id(field, value)}}


def _as_attempted(rollout: Rollout, attempt: Attempt | None) -> Rollout:
    if attempt is None:
        return rollout
    values = {name: getattr(rollout, name) for name in Rollout.model_fields}
    return AttemptedRollout.model_construct(**values, attempt=attempt)


def _plain(rollout: Rollout) -> Rollout:
    if isinstance(rollout, AttemptedRollout):
        return Rollout.model_construct(**{name: getattr(rollout, name) for name in Rollout.model_fields})
    return rollout


def _page_sort(
    model: type[Any], sort_by: str | None, sort_order: str, limit: int, offset: int
) -> SortOptions | None:
    """Check a query's page and sort arguments; the collections' sort options (None: insertion order)."""
    validate_pagination(limit, offset)
    order = validate_sort_order(sort_order)
    if sort_by is None:
        return None
    sort_key_for(sort_by, model)
    return {"name": sort_by, "order": order}


class CollectionBasedLightningStore(LightningStore03, Generic[T_collections]):
    """A `LightningStore` whose state lives in a `LightningCollections` (see the module docstring).

    Every method is one ``collections.atomic()`` block, so it is as atomic, thread-safe and durable as the
    collections are: with `InMemoryLightningCollections` (the default) it is safe across threads and event
    loops and keeps everything in memory. Waiting in `wait_for_rollouts` is woken by rollouts finishing in
    this process and re-checks the collections at least every second for changes made elsewhere.

    Args:
        collections: Where the state lives; a fresh `InMemoryLightningCollections` when omitted.
        read_snapshot: Ask the collections for snapshot reads in read-only methods.
        tracker: Must be None (agl stores report through `statistics()`).
        scan_debounce_seconds: Minimum seconds of `clock` between two watchdog scans; 0 scans before
            every guarded call.
        clock: "Now" in seconds since the epoch, for every timestamp and the watchdog.
    """

    def __init__(
        self,
        collections: T_collections | None = None,
        *,
        read_snapshot: bool = False,
        tracker: object | None = None,
        scan_debounce_seconds: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if tracker is not None:
            raise ValueError(
                f"{type(self).__name__}(tracker=...) is not supported in agl: read statistics() instead."
            )
        if collections is not None and not isinstance(collections, LightningCollections):
            raise TypeError(
                f"collections must be a LightningCollections (e.g. InMemoryLightningCollections()), "
                f"got {type(collections).__name__}."
            )
        super().__init__(clock=clock, scan_debounce_seconds=scan_debounce_seconds)
        self.collections: T_collections = cast(
            T_collections, collections if collections is not None else InMemoryLightningCollections()
        )
        self._read_snapshot = bool(read_snapshot)
        self._latest_resources_id: str | None = None
        self._waiters = WaiterRegistry()
        self._waiters_lock = threading.Lock()
        self._closed = False

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        """Thread-safe when the collections use thread locks; always async-safe; no zero-copy, no OTLP."""
        thread_safe = getattr(self.collections, "lock_type", "thread") == "thread"
        return LightningStoreCapabilities(
            thread_safe=thread_safe, async_safe=True, zero_copy=False, otlp_traces=False
        )

    async def close(self) -> None:
        """Fail pending and future `wait_for_rollouts` calls with `StoreClosedError`. Idempotent."""
        with self._waiters_lock:
            self._closed = True
            self._waiters.wake_all()

    def _read(self) -> contextlib.AbstractAsyncContextManager[LightningCollections]:
        return self.collections.atomic(mode="r", snapshot=self._read_snapshot)

    def _write(self) -> contextlib.AbstractAsyncContextManager[LightningCollections]:
        return self.collections.atomic(mode="rw")

    def _finished(self, rollout_id: str) -> None:
        with self._waiters_lock:
            self._waiters.rollout_finished(rollout_id)

    async def statistics(self) -> LightningStoreStatistics:
        """Counts of rollouts, attempts, spans, resources and workers, the class name and the uptime."""
        async with self._read() as c:
            return LightningStoreStatistics(
                name=type(self).__name__,
                total_rollouts=await c.rollouts.size(),
                total_attempts=await c.attempts.size(),
                total_spans=await c.spans.size(),
                total_resources=await c.resources.size(),
                total_workers=await c.workers.size(),
                uptime=self._uptime(),
            )

    # ------------------------------------------------------------------ state helpers (inside atomic)

    async def _rollout(self, c: LightningCollections, rollout_id: str) -> Rollout:
        rollout = await c.rollouts.get(_id_filter("rollout_id", rollout_id))
        if rollout is None:
            raise RolloutNotFoundError(rollout_id)
        return rollout

    async def _latest(self, c: LightningCollections, rollout_id: str) -> Attempt | None:
        return await c.attempts.get(_id_filter("rollout_id", rollout_id), sort=_LATEST_FIRST)

    async def _store_rollout(self, c: LightningCollections, rollout: Rollout) -> None:
        previous = await c.rollouts.get(_id_filter("rollout_id", rollout.rollout_id))
        await c.rollouts.upsert([rollout])
        status = rollout.status
        if status in FINISHED_ROLLOUT_STATUSES:
            self._finished(rollout.rollout_id)
        elif (
            status in QUEUING_ROLLOUT_STATUSES
            and (previous is None or previous.status not in QUEUING_ROLLOUT_STATUSES)
            and not await c.rollout_queue.has(rollout.rollout_id)
        ):
            await c.rollout_queue.enqueue([rollout.rollout_id])

    async def _set_rollout_status(
        self, c: LightningCollections, rollout: Rollout, status: str, now: float
    ) -> Rollout:
        updated = rollout.model_copy(update={"status": status, "end_time": rollout_end_time_for(status, now)})
        await self._store_rollout(c, updated)
        return updated

    async def _upsert_worker(
        self, c: LightningCollections, worker_id: str, updates: Mapping[str, Any]
    ) -> Worker:
        current = await c.workers.get(_id_filter("worker_id", worker_id))
        worker = apply_worker_updates(current, worker_id, updates)
        await c.workers.upsert([worker])
        return worker

    async def _create_rollout(
        self,
        c: LightningCollections,
        input: Any,
        mode: RolloutMode | None,
        resources_id: str | None,
        config: RolloutConfig,
        metadata: dict[str, Any] | None,
        status: RolloutStatus,
        now: float,
    ) -> Rollout:
        rollout_id = new_rollout_id()
        while await c.rollouts.get(_id_filter("rollout_id", rollout_id)) is not None:
            rollout_id = new_rollout_id()
        if resources_id is None:
            latest = await self._latest_resources(c)
            resources_id = None if latest is None else latest.resources_id
        rollout = Rollout(
            rollout_id=rollout_id,
            input=input,
            start_time=now,
            mode=mode,
            resources_id=resources_id,
            status=status,
            config=config,
            metadata=metadata,
        )
        await c.rollouts.insert([rollout])
        if status in QUEUING_ROLLOUT_STATUSES:
            await c.rollout_queue.enqueue([rollout_id])
        return rollout

    async def _new_attempt(
        self, c: LightningCollections, rollout: Rollout, now: float, worker_id: str | None, *, dequeue: bool
    ) -> AttemptedRollout:
        rollout_id = rollout.rollout_id
        previous = await c.attempts.query(_id_filter("rollout_id", rollout_id))
        taken = {a.attempt_id for a in previous}
        attempt_id = new_attempt_id()
        while attempt_id in taken:
            attempt_id = new_attempt_id()
        attempt = Attempt(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            sequence_id=previous.total + 1,
            start_time=now,
            status="preparing",
            worker_id=worker_id,
        )
        await c.attempts.insert([attempt])
        rollout = rollout.model_copy(update={"status": "preparing", "end_time": None})
        await self._store_rollout(c, rollout)
        if worker_id:
            await self._upsert_worker(
                c,
                worker_id,
                worker_updates_for_attempt("preparing", rollout_id, attempt_id, now, dequeue=dequeue),
            )
        return cast(AttemptedRollout, _as_attempted(rollout, attempt))

    async def _pop_queued(self, c: LightningCollections) -> Rollout | None:
        while True:
            taken = await c.rollout_queue.dequeue(1)
            if not taken:
                return None
            rollout = await c.rollouts.get(_id_filter("rollout_id", taken[0]))
            if rollout is not None and rollout.status in QUEUING_ROLLOUT_STATUSES:
                return rollout

    async def _write_attempt_update(
        self,
        c: LightningCollections,
        rollout: Rollout,
        attempt: Attempt,
        is_latest: bool,
        now: float,
        status: AttemptStatus | Unset,
        worker_id: str | Unset | None,
        last_heartbeat_time: float | Unset | None,
        metadata: dict[str, Any] | Unset | None,
    ) -> Attempt:
        changes: dict[str, Any] = {}
        if status is not UNSET:
            changes["status"] = status
            changes["end_time"] = attempt_end_time_for(cast(str, status), now)
        if worker_id is not UNSET:
            changes["worker_id"] = worker_id
        if last_heartbeat_time is not UNSET:
            changes["last_heartbeat_time"] = last_heartbeat_time
        if metadata is not UNSET:
            changes["metadata"] = metadata
        if changes:
            attempt = attempt.model_copy(update=changes)
            await c.attempts.update([attempt])
        if status is not UNSET:
            new_status = next_rollout_status_after_attempt_update(
                rollout, attempt, cast(AttemptStatus, status), is_latest=is_latest
            )
            if new_status is not None:
                await self._set_rollout_status(c, rollout, new_status, now)
        if attempt.worker_id and worker_sync_required(worker_id, status, attempt.worker_id):
            await self._upsert_worker(
                c,
                attempt.worker_id,
                worker_updates_for_attempt(attempt.status, attempt.rollout_id, attempt.attempt_id, now),
            )
        return attempt

    async def _scan_for_unhealthy_rollouts(self) -> None:
        """The watchdog: flag timed-out and unresponsive attempts (debounced by ``scan_debounce_seconds``)."""
        if not self._watchdog_due():
            return
        async with self._write() as c:
            running = await c.rollouts.query({"status": {"within": list(RUNNING_ROLLOUT_STATUSES)}})
            watched: list[tuple[Rollout, Attempt]] = []
            for rollout in running:
                config = rollout.config
                if config.timeout_seconds is None and config.unresponsive_seconds is None:
                    continue
                attempt = await self._latest(c, rollout.rollout_id)
                if attempt is not None:
                    watched.append((rollout, attempt))
            if not watched:
                return
            now = self.clock()
            flagged = scan_unhealthy(((attempt, rollout.config) for rollout, attempt in watched), now)
            for rollout, attempt in watched:
                status = flagged.get((rollout.rollout_id, attempt.attempt_id))
                if status is not None:
                    await self._write_attempt_update(
                        c, rollout, attempt, True, now, status, UNSET, UNSET, UNSET
                    )

    # ------------------------------------------------------------------ rollouts and attempts

    @healthcheck_before  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
    async def start_rollout(
        self,
        input: Any,
        mode: RolloutMode | None = None,
        resources_id: str | None = None,
        config: RolloutConfig | None = None,
        metadata: dict[str, Any] | None = None,
        worker_id: str | None = None,
    ) -> AttemptedRollout:
        """Create a ``preparing`` rollout with attempt #1, not queued (see `LightningStore.start_rollout`)."""
        check_json_value("input", input)
        mode = validate_mode(mode)
        resources_id = check_optional_str("resources_id", resources_id)
        worker_id = check_optional_str("worker_id", worker_id)
        config_copy, metadata_copy = _config(config), _metadata(metadata)
        async with self._write() as c:
            now = self.clock()
            rollout = await self._create_rollout(
                c, input, mode, resources_id, config_copy, metadata_copy, "preparing", now
            )
            return await self._new_attempt(c, rollout, now, worker_id, dequeue=False)

    @healthcheck_before  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
    async def enqueue_rollout(
        self,
        input: Any,
        mode: RolloutMode | None = None,
        resources_id: str | None = None,
        config: RolloutConfig | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Rollout:
        """Create a ``queuing`` rollout at the tail of the queue (see `LightningStore.enqueue_rollout`)."""
        check_json_value("input", input)
        mode = validate_mode(mode)
        resources_id = check_optional_str("resources_id", resources_id)
        config_copy, metadata_copy = _config(config), _metadata(metadata)
        async with self._write() as c:
            return await self._create_rollout(
                c, input, mode, resources_id, config_copy, metadata_copy, "queuing", self.clock()
            )

    @healthcheck_before  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
    async def enqueue_many_rollouts(self, rollouts: Sequence[EnqueueRolloutRequest]) -> Sequence[Rollout]:
        """Enqueue every request atomically, in input order (all are validated first)."""
        prepared = [
            (
                r.input,
                validate_mode(r.mode),
                check_optional_str("resources_id", r.resources_id),
                _config(r.config),
                _metadata(r.metadata),
            )
            for r in check_enqueue_requests(rollouts)
        ]
        async with self._write() as c:
            now = self.clock()
            return [
                await self._create_rollout(c, input, mode, rid, config, metadata, "queuing", now)
                for input, mode, rid, config, metadata in prepared
            ]

    @healthcheck_before  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
    async def dequeue_rollout(self, worker_id: str | None = None) -> AttemptedRollout | None:
        """Claim the oldest queued rollout with a new ``preparing`` attempt; None if the queue is empty."""
        claimed = await self._dequeue(1, worker_id)
        return claimed[0] if claimed else None

    @healthcheck_before  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
    async def dequeue_many_rollouts(
        self, *, limit: int = 1, worker_id: str | None = None
    ) -> Sequence[AttemptedRollout]:
        """Claim up to ``limit`` queued rollouts atomically, in FIFO order (``limit <= 0``: none)."""
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise InvalidRequestError(f"limit must be an integer, got {limit!r}.")
        check_int_bound("limit", limit)
        return await self._dequeue(limit, worker_id)

    async def _dequeue(self, limit: int, worker_id: str | None) -> list[AttemptedRollout]:
        worker_id = check_optional_str("worker_id", worker_id)
        if limit <= 0:
            return []
        claimed: list[AttemptedRollout] = []
        async with self._write() as c:
            now = self.clock()
            while len(claimed) < limit:
                rollout = await self._pop_queued(c)
                if rollout is None:
                    break
                claimed.append(await self._new_attempt(c, rollout, now, worker_id, dequeue=True))
            if not claimed and worker_id:
                current = await c.workers.get(_id_filter("worker_id", worker_id))
                await self._upsert_worker(
                    c,
                    worker_id,
                    worker_updates_for_empty_dequeue(None if current is None else current.status, now),
                )
        return claimed

    @healthcheck_before  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
    async def start_attempt(self, rollout_id: str, worker_id: str | None = None) -> AttemptedRollout:
        """Start a new ``preparing`` attempt on any rollout (manual retry; ignores ``max_attempts``)."""
        worker_id = check_optional_str("worker_id", worker_id)
        async with self._write() as c:
            rollout = await self._rollout(c, rollout_id)
            return await self._new_attempt(c, rollout, self.clock(), worker_id, dequeue=False)

    @healthcheck_before  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
    async def query_rollouts(
        self,
        *,
        status_in: Sequence[RolloutStatus] | None = None,
        rollout_id_in: Sequence[str] | None = None,
        rollout_id_contains: str | None = None,
        filter_logic: Literal["and", "or"] = "and",
        sort_by: str | None = None,
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
        status: Sequence[RolloutStatus] | None = None,
        rollout_ids: Sequence[str] | None = None,
        mode_in: Sequence[RolloutMode] | None = None,
        input_contains: str | None = None,
    ) -> PaginatedResult[Rollout | AttemptedRollout]:
        """Rollouts matching the filters, each with its latest attempt (`LightningStore.query_rollouts`)."""
        statuses, ids = resolve_rollout_query_aliases(status_in, rollout_id_in, status, rollout_ids)
        aggregate = validate_filter_logic(filter_logic)
        where = rollout_query_filter(  # validates every argument the agl way
            status_in=statuses,
            rollout_id_in=ids,
            rollout_id_contains=rollout_id_contains,
            filter_logic=aggregate,
            mode_in=mode_in,
            input_contains=input_contains,
        )
        if mode_in is not None or input_contains is not None:  # agl's conditions: no collection operator
            return await self._query_rollouts_matching(where, sort_by, sort_order, limit, offset)
        conditions: dict[str, Any] = {}
        if statuses is not None:
            conditions["status"] = {"within": list(validate_statuses(statuses, "rollout"))}
        rollout_id_ops: dict[str, Any] = {}
        if ids is not None:
            if isinstance(ids, (str, bytes)) or not all(isinstance(i, str) for i in ids):
                raise InvalidRequestError(f"rollout_id_in must be a list of strings, got {ids!r}.")
            rollout_id_ops["within"] = list(ids)
        if rollout_id_contains is not None:
            rollout_id_ops["contains"] = rollout_id_contains
        if rollout_id_ops:
            conditions["rollout_id"] = rollout_id_ops
        if conditions:
            conditions["_aggregate"] = aggregate
        sort = _page_sort(Rollout, sort_by, sort_order, limit, offset)
        async with self._read() as c:
            page = await c.rollouts.query(conditions or None, sort, limit, offset)
            items = [_as_attempted(r, await self._latest(c, r.rollout_id)) for r in page]
        return PaginatedResult(items=items, limit=limit, offset=offset, total=page.total)

    async def _query_rollouts_matching(
        self, where: NormalizedFilter, sort_by: str | None, sort_order: str, limit: int, offset: int
    ) -> PaginatedResult[Rollout | AttemptedRollout]:
        """`query_rollouts` by testing every rollout against `where` in Python (the collections are local)."""
        sort = _page_sort(Rollout, sort_by, sort_order, limit, offset)
        predicate = build_predicate(where)
        async with self._read() as c:
            everything = await c.rollouts.query(None, sort)
            page = paginate([r for r in everything.items if predicate(r)], limit, offset)
            items = [_as_attempted(r, await self._latest(c, r.rollout_id)) for r in page.items]
        return PaginatedResult(items=items, limit=limit, offset=offset, total=page.total)

    @healthcheck_before  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
    async def query_attempts(
        self,
        rollout_id: str,
        *,
        sort_by: str | None = "sequence_id",
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
    ) -> PaginatedResult[Attempt]:
        """Attempts of one rollout, oldest first by default; empty for an unknown rollout."""
        sort = _page_sort(Attempt, sort_by, sort_order, limit, offset)
        async with self._read() as c:
            return await c.attempts.query(
                _id_filter("rollout_id", rollout_id), sort or _BY_SEQUENCE, limit, offset
            )

    @healthcheck_before  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
    async def get_rollout_by_id(self, rollout_id: str) -> Rollout | AttemptedRollout | None:
        """The rollout with its latest attempt attached when it has one; None if unknown."""
        async with self._read() as c:
            rollout = await c.rollouts.get(_id_filter("rollout_id", rollout_id))
            return None if rollout is None else _as_attempted(rollout, await self._latest(c, rollout_id))

    @healthcheck_before  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
    async def get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        """The attempt with the highest ``sequence_id``, or None."""
        async with self._read() as c:
            return await self._latest(c, rollout_id)

    @healthcheck_before  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
    async def update_rollout(
        self,
        rollout_id: str,
        input: Any | Unset = UNSET,
        mode: RolloutMode | Unset | None = UNSET,
        resources_id: str | Unset | None = UNSET,
        status: RolloutStatus | Unset = UNSET,
        config: RolloutConfig | Unset = UNSET,
        metadata: dict[str, Any] | Unset | None = UNSET,
    ) -> Rollout:
        """Replace the given rollout fields (see `LightningStore.update_rollout`); returns the new rollout.

        ``config=None`` resets the config to the defaults.
        """
        changes = rollout_changes(
            input,
            mode,
            resources_id,
            status,
            config,
            metadata,
            encode_input=lambda value: value,
            encode_config=lambda value: {"config": _config(value)},
            encode_metadata=_metadata,
        )
        async with self._write() as c:
            rollout = await self._rollout(c, rollout_id)
            if status is not UNSET:
                changes["end_time"] = rollout_end_time_for(cast(str, status), self.clock())
            updated = rollout.model_copy(update=changes)
            await self._store_rollout(c, updated)
            return updated

    @healthcheck_before  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
    async def update_attempt(
        self,
        rollout_id: str,
        attempt_id: str | Literal["latest"],
        status: AttemptStatus | Unset = UNSET,
        worker_id: str | Unset = UNSET,
        last_heartbeat_time: float | Unset = UNSET,
        metadata: dict[str, Any] | Unset | None = UNSET,
    ) -> Attempt:
        """Replace the given attempt fields and propagate (see `LightningStore.update_attempt`)."""
        if status is not UNSET:
            validate_attempt_status(status)
        if worker_id is not UNSET:
            check_optional_str("worker_id", worker_id)
        if last_heartbeat_time is not UNSET:
            check_optional_number("last_heartbeat_time", last_heartbeat_time)
        if metadata is not UNSET:
            metadata = _metadata(metadata)
        async with self._write() as c:
            rollout = await self._rollout(c, rollout_id)
            latest = await self._latest(c, rollout_id)
            if attempt_id == "latest":
                attempt = latest
            else:
                attempt = await c.attempts.get(
                    {"rollout_id": {"exact": rollout_id}, "attempt_id": {"exact": attempt_id}}
                )
            if attempt is None:
                raise AttemptNotFoundError(rollout_id, attempt_id)
            is_latest = latest is not None and latest.attempt_id == attempt.attempt_id
            return await self._write_attempt_update(
                c, rollout, attempt, is_latest, self.clock(), status, worker_id, last_heartbeat_time, metadata
            )

    async def wait_for_rollouts(
        self, *, rollout_ids: list[str], timeout: float | None = None
    ) -> list[Rollout]:
        """Wait until the rollouts finish; return those finished by the deadline, in input order.

        Unknown ids are omitted; ``timeout <= 0`` checks once; None waits indefinitely (real time).
        Raises `StoreClosedError` if the store is or gets closed.
        """
        ids = check_rollout_ids(rollout_ids)
        wait_limit = check_timeout(timeout)
        loop = asyncio.get_running_loop()
        deadline = None if wait_limit is None else time.monotonic() + wait_limit
        while True:
            with self._waiters_lock:
                if self._closed:
                    raise StoreClosedError("The store was closed; wait_for_rollouts cannot wait on it.")
                waiter = self._waiters.register(loop, ids)
            try:
                await self._scan_for_unhealthy_rollouts()
                async with self._read() as c:
                    found = {r.rollout_id: r for r in await c.rollouts.query({"rollout_id": {"within": ids}})}
                finished = [
                    _plain(found[rid])
                    for rid in ids
                    if rid in found and found[rid].status in FINISHED_ROLLOUT_STATUSES
                ]
                pending = [
                    rid for rid in ids if rid in found and found[rid].status not in FINISHED_ROLLOUT_STATUSES
                ]
                remaining = None if deadline is None else deadline - time.monotonic()
                if not pending or (remaining is not None and remaining <= 0):
                    return finished
                poll = min(_WAIT_POLL_MAX_S, max(0.05, self.scan_debounce_seconds))
                delay = poll if remaining is None else min(remaining, poll)
                await asyncio.wait((waiter.future,), timeout=delay)
            finally:
                with self._waiters_lock:
                    self._waiters.unregister(waiter)

    # ------------------------------------------------------------------ spans

    async def add_span(self, span: Span) -> Span | None:  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
        """Store the span and count it as a heartbeat; None if its (rollout, attempt, span) id is stored."""
        inserted = await self._add_spans([validate_span(span)])
        return inserted[0] if inserted else None

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
        """Validate every span first, then store the new ones atomically; returns those inserted."""
        return await self._add_spans([validate_span(span) for span in spans])

    async def _add_spans(self, spans: list[Span]) -> list[Span]:
        async with self._write() as c:
            targets: dict[tuple[str, str], tuple[Rollout, Attempt, bool]] = {}
            for span in spans:
                pair = (span.rollout_id, span.attempt_id)
                if pair in targets:
                    continue
                rollout = await self._rollout(c, span.rollout_id)
                attempt = await c.attempts.get(
                    {"rollout_id": {"exact": span.rollout_id}, "attempt_id": {"exact": span.attempt_id}}
                )
                if attempt is None:
                    raise AttemptNotFoundError(span.rollout_id, span.attempt_id)
                latest = await self._latest(c, span.rollout_id)
                targets[pair] = (
                    rollout,
                    attempt,
                    latest is not None and latest.attempt_id == attempt.attempt_id,
                )
            inserted: list[Span] = []
            seen: set[tuple[str, str, str]] = set()
            for span in spans:
                key = (span.rollout_id, span.attempt_id, span.span_id)
                if key in seen:
                    continue
                seen.add(key)
                existing = await c.spans.get(
                    {
                        "rollout_id": {"exact": span.rollout_id},
                        "attempt_id": {"exact": span.attempt_id},
                        "span_id": {"exact": span.span_id},
                    }
                )
                if existing is not None:
                    continue
                if span.sequence_id:
                    await c.span_sequence_ids.chmax(span.rollout_id, span.sequence_id)
                else:  # sent with 0: the store numbers it (`logic.number_span`), as agl's stores do
                    span = number_span(span, await c.span_sequence_ids.inc(span.rollout_id, 1))
                await c.spans.insert([span])
                inserted.append(span)
            if inserted:
                now = self.clock()
                for pair in dict.fromkeys((s.rollout_id, s.attempt_id) for s in inserted):
                    rollout, attempt, is_latest = targets[pair]
                    await self._heartbeat(c, pair[0], pair[1], is_latest, now)
            return inserted

    async def _heartbeat(
        self, c: LightningCollections, rollout_id: str, attempt_id: str, is_latest: bool, now: float
    ) -> None:
        rollout = await self._rollout(c, rollout_id)
        attempt = await c.attempts.get(
            {"rollout_id": {"exact": rollout_id}, "attempt_id": {"exact": attempt_id}}
        )
        assert attempt is not None  # checked by the caller inside the same atomic block
        new_status, rollout_status = heartbeat_transition(rollout.status, attempt.status, is_latest=is_latest)
        changes: dict[str, Any] = {"last_heartbeat_time": now}
        if new_status != attempt.status:
            changes.update(status=new_status, end_time=attempt_end_time_for(new_status, now))
        await c.attempts.update([attempt.model_copy(update=changes)])
        if rollout_status is not None:
            await self._set_rollout_status(c, rollout, rollout_status, now)

    async def get_next_span_sequence_id(self, rollout_id: str, attempt_id: str) -> int:  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
        """Issue the rollout's next span sequence id (1, 2, 3, ...; ids are not checked to exist)."""
        check_id("rollout_id", rollout_id)
        async with self._write() as c:
            return await c.span_sequence_ids.inc(rollout_id, 1)

    async def get_many_span_sequence_ids(  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
        self, rollout_attempt_ids: Sequence[tuple[str, str]]
    ) -> Sequence[int]:
        """Issue one sequence id per ``(rollout_id, attempt_id)`` pair, atomically, in input order."""
        rollout_ids: list[str] = []
        for pair in rollout_attempt_ids:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2 or not isinstance(pair[0], str):
                raise InvalidRequestError(
                    f"Expected (rollout_id, attempt_id) pairs of strings, got {pair!r}."
                )
            rollout_ids.append(pair[0])
        async with self._write() as c:
            current = {rid: await c.span_sequence_ids.get(rid, 0) or 0 for rid in set(rollout_ids)}
            issued, updated = plan_sequence_ids(rollout_ids, lambda rid: current[rid])
            for rid, value in updated.items():
                await c.span_sequence_ids.set(rid, value)
            return issued

    @healthcheck_before  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
    async def query_spans(
        self,
        rollout_id: str,
        attempt_id: str | Literal["latest"] | None = None,
        *,
        trace_id: str | None = None,
        trace_id_contains: str | None = None,
        span_id: str | None = None,
        span_id_contains: str | None = None,
        parent_id: str | None = None,
        parent_id_contains: str | None = None,
        name: str | None = None,
        name_contains: str | None = None,
        filter_logic: Literal["and", "or"] = "and",
        limit: int = -1,
        offset: int = 0,
        sort_by: str | None = "sequence_id",
        sort_order: Literal["asc", "desc"] = "asc",
    ) -> PaginatedResult[Span]:
        """Spans of one rollout; see `LightningStore.query_spans`."""
        check_id("rollout_id", rollout_id)
        check_optional_str("attempt_id", attempt_id)
        aggregate = validate_filter_logic(filter_logic)
        span_query_filter(  # validates every argument the agl way
            rollout_id,
            None,
            trace_id=trace_id,
            trace_id_contains=trace_id_contains,
            span_id=span_id,
            span_id_contains=span_id_contains,
            parent_id=parent_id,
            parent_id_contains=parent_id_contains,
            name=name,
            name_contains=name_contains,
            filter_logic=aggregate,
        )
        conditions: dict[str, Any] = {}
        for field, exact, contains in (
            ("trace_id", trace_id, trace_id_contains),
            ("span_id", span_id, span_id_contains),
            ("parent_id", parent_id, parent_id_contains),
            ("name", name, name_contains),
        ):
            ops: dict[str, Any] = {}
            if exact is not None:
                ops["exact"] = check_optional_str(field, exact)
            if contains is not None:
                ops["contains"] = check_optional_str(f"{field}_contains", contains)
            if ops:
                conditions[field] = ops
        sort = _page_sort(Span, sort_by, sort_order, limit, offset)
        async with self._read() as c:
            if attempt_id == "latest":
                latest = await self._latest(c, rollout_id)
                if latest is None:
                    return PaginatedResult(items=[], limit=limit, offset=offset, total=0)
                attempt_id = latest.attempt_id
            must: dict[str, Any] = {"rollout_id": {"exact": rollout_id}}
            if attempt_id is not None:
                must["attempt_id"] = {"exact": attempt_id}
            query: dict[str, Any] = {**conditions, "_aggregate": aggregate, "_must": must}
            return await c.spans.query(cast(FilterOptions, query), sort, limit, offset)

    # ------------------------------------------------------------------ resources

    @staticmethod
    def _resources_update(
        resources_id: str, resources: NamedResources, create_time: float, now: float, version: int
    ) -> ResourcesUpdate:
        try:
            return ResourcesUpdate(
                resources_id=resources_id,
                create_time=create_time,
                update_time=now,
                version=version,
                resources=resources,
            )
        except ValidationError as exc:
            raise InvalidRequestError(
                f"Invalid resources (expected a dict of name -> resource): {exc}"
            ) from None

    async def _latest_resources(self, c: LightningCollections) -> ResourcesUpdate | None:
        if self._latest_resources_id is not None:
            found = await c.resources.get(_id_filter("resources_id", self._latest_resources_id))
            if found is not None:
                return found
        return await c.resources.get(sort={"name": "update_time", "order": "desc"})

    async def add_resources(self, resources: NamedResources) -> ResourcesUpdate:  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
        """Store a new snapshot under a fresh ``rs-`` id at version 1; it becomes the latest."""
        async with self._write() as c:
            now = self.clock()
            resources_id = new_resources_id()
            while await c.resources.get(_id_filter("resources_id", resources_id)) is not None:
                resources_id = new_resources_id()
            update = self._resources_update(resources_id, resources, now, now, 1)
            await c.resources.insert([update])
            self._latest_resources_id = resources_id
            return update

    @healthcheck_before  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
    async def update_resources(self, resources_id: str, resources: NamedResources) -> ResourcesUpdate:
        """Upsert a snapshot: version 1 for a new id, else version+1 keeping ``create_time``."""
        if not isinstance(resources_id, str) or not resources_id:
            raise InvalidRequestError(f"resources_id must be a non-empty string, got {resources_id!r}.")
        async with self._write() as c:
            now = self.clock()
            previous = await c.resources.get(_id_filter("resources_id", resources_id))
            if previous is None:
                update = self._resources_update(resources_id, resources, now, now, 1)
            else:
                update = self._resources_update(
                    resources_id, resources, previous.create_time, now, previous.version + 1
                )
            await c.resources.upsert([update])
            self._latest_resources_id = resources_id
            return update

    async def get_resources_by_id(self, resources_id: str) -> ResourcesUpdate | None:  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
        """The snapshot with this id, or None."""
        async with self._read() as c:
            return await c.resources.get(_id_filter("resources_id", resources_id))

    async def get_latest_resources(self) -> ResourcesUpdate | None:  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
        """The most recently added or updated snapshot, or None."""
        async with self._read() as c:
            return await self._latest_resources(c)

    async def query_resources(  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
        self,
        *,
        resources_id: str | None = None,
        resources_id_contains: str | None = None,
        sort_by: str | None = None,
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
    ) -> PaginatedResult[ResourcesUpdate]:
        """Snapshots matching both filters (AND), insertion order unless ``sort_by`` is given."""
        resources_query_filter(resources_id=resources_id, resources_id_contains=resources_id_contains)
        ops: dict[str, Any] = {}
        if resources_id is not None:
            ops["exact"] = check_optional_str("resources_id", resources_id)
        if resources_id_contains is not None:
            ops["contains"] = check_optional_str("resources_id_contains", resources_id_contains)
        sort = _page_sort(ResourcesUpdate, sort_by, sort_order, limit, offset)
        async with self._read() as c:
            return await c.resources.query({"resources_id": ops} if ops else None, sort, limit, offset)

    # ------------------------------------------------------------------ workers

    @healthcheck_before  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
    async def query_workers(
        self,
        *,
        status_in: Sequence[WorkerStatus] | None = None,
        worker_id_contains: str | None = None,
        filter_logic: Literal["and", "or"] = "and",
        sort_by: str | None = None,
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
    ) -> PaginatedResult[Worker]:
        """Workers matching the filters combined with ``filter_logic`` (no condition matches all)."""
        aggregate = validate_filter_logic(filter_logic)
        worker_query_filter(
            status_in=status_in, worker_id_contains=worker_id_contains, filter_logic=aggregate
        )
        conditions: dict[str, Any] = {}
        if status_in is not None:
            conditions["status"] = {"within": list(validate_statuses(status_in, "worker"))}
        if worker_id_contains is not None:
            conditions["worker_id"] = {
                "contains": check_optional_str("worker_id_contains", worker_id_contains)
            }
        if conditions:
            conditions["_aggregate"] = aggregate
        sort = _page_sort(Worker, sort_by, sort_order, limit, offset)
        async with self._read() as c:
            return await c.workers.query(conditions or None, sort, limit, offset)

    async def get_worker_by_id(self, worker_id: str) -> Worker | None:  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
        """The worker with this id, or None."""
        async with self._read() as c:
            return await c.workers.get(_id_filter("worker_id", worker_id))

    async def update_worker(self, worker_id: str, heartbeat_stats: dict[str, Any] | Unset = UNSET) -> Worker:  # type: ignore[misc]  # final in agl; LightningStore03 routes it here
        """Heartbeat: upsert the worker, stamp ``last_heartbeat_time`` and replace the stats if given."""
        if not isinstance(worker_id, str) or not worker_id:
            raise InvalidRequestError(f"worker_id must be a non-empty string, got {worker_id!r}.")
        async with self._write() as c:
            updates = worker_updates_for_heartbeat(self.clock(), heartbeat_stats)
            return await self._upsert_worker(c, worker_id, updates)


COLLECTION_STORE_PUBLIC_METHODS: frozenset[str] = frozenset(
    [name for name in LightningStore.__dict__ if not name.startswith("_")] + ["_scan_for_unhealthy_rollouts"]
)
"""The store methods callers use (the `LightningStore` API) plus the watchdog scan."""

COLLECTION_STORE_ALL_METHODS: frozenset[str] = frozenset(CollectionBasedLightningStore.__dict__)
"""Every name `CollectionBasedLightningStore` defines."""
