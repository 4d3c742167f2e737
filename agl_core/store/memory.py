"""`InMemoryLightningStore`: the fast in-process store (``memory:``), safe across threads and event loops.

The design is described in docs/stores.md (Memory): one lock with no awaits inside it, immutable
snapshots (a change stores a shallow copy; returned objects are shared with the store, so treat them and
added spans as read-only), a record per rollout with its attempts and spans, a status index, a deque as
the FIFO queue, and event-driven `wait_for_rollouts`. This module is the async, locking API; the
collections and the write paths it runs under its lock are in `agl_core.store._memory_state`, and the
semantics shared with the other backends come from `agl_core.store.logic`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from agl_core.store._memory_state import MemoryState, RolloutRecord, has_watchdog_deadline, required_values
from agl_core.store.base import (
    UNSET,
    LightningStore,
    LightningStoreCapabilities,
    LightningStoreStatistics,
)
from agl_core.store.errors import (
    AttemptNotFoundError,
    InvalidRequestError,
    StoreClosedError,
)
from agl_core.store.logic import (
    NormalizedFilter,
    build_predicate,
    check_rollout_ids,
    check_timeout,
    draw_unique_id,
    new_resources_id,
    paginate,
    plan_sequence_ids,
    rollout_end_time_for,
    sort_items,
    validate_sort_order,
    worker_updates_for_heartbeat,
)
from agl_core.types import (
    Attempt,
    AttemptedRollout,
    PaginatedResult,
    ResourcesUpdate,
    Rollout,
    Span,
    Worker,
)
from agl_core.types import queries as q
from agl_core.types.status import FINISHED_ROLLOUT_STATUSES

if TYPE_CHECKING:
    from agl_core.types import (
        NamedResources,
    )

__all__ = ["InMemoryLightningStore"]

logger = logging.getLogger(__name__)

_S = TypeVar("_S", bound="InMemoryLightningStore")

_FINISHED = FINISHED_ROLLOUT_STATUSES


def _as_invalid_request(what: str, exc: ValidationError) -> InvalidRequestError:
    return InvalidRequestError(f"Invalid {what}: {exc}")


class InMemoryLightningStore(LightningStore):
    """The in-process `LightningStore`: a dict-and-deque store behind one lock (see the module docstring).

    Every method follows `LightningStore`'s contract. Returned models are immutable snapshots shared
    with the store: they never change after being returned, and callers must not modify them.
    `close()` wakes and fails pending `wait_for_rollouts` calls (`StoreClosedError`) and makes later
    waits fail; the data stays readable. Spans are never evicted.

    Args:
        clock: "Now" in seconds since the epoch, for every timestamp and the watchdog (tests pass a fake).
        scan_debounce_seconds: Minimum seconds of `clock` between two watchdog scans; 0 scans before
            every guarded call.
        thread_safe: Guard state with a `threading.Lock` (the default). ``False`` skips the lock: use
            the store from one thread only (any number of tasks of its event loop).
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        scan_debounce_seconds: float = 10.0,
        thread_safe: bool = True,
        eviction_memory_threshold: float | None = None,
        safe_memory_threshold: float | None = None,
        span_size_estimator: Callable[[Any], int] | None = None,
        tracker: object = None,
    ) -> None:
        # Agent Lightning 0.3's span eviction and metrics options: agl's memory store keeps every span.
        if any(
            o is not None for o in (eviction_memory_threshold, safe_memory_threshold, span_size_estimator)
        ):
            raise ValueError(
                "InMemoryLightningStore does not evict spans in agl (0.3's eviction_memory_threshold, "
                "safe_memory_threshold, span_size_estimator): use SqliteLightningStore ('sqlite:///run.db') "
                "for runs too large for memory."
            )
        if tracker is not None:
            raise ValueError(
                "InMemoryLightningStore(tracker=...) is not supported: read statistics() instead."
            )
        super().__init__(clock=clock, scan_debounce_seconds=scan_debounce_seconds)
        self._thread_safe = bool(thread_safe)
        self._lock: AbstractContextManager[Any] = threading.Lock() if thread_safe else nullcontext()
        self._state = MemoryState(clock, self._watchdog_due)
        self._closed = False
        self._wait_poll_seconds = min(1.0, max(0.05, self.scan_debounce_seconds))

    @classmethod
    def from_uri(cls: type[_S], uri: str, **kwargs: Any) -> _S:
        """Open a fresh, empty store from ``"memory:"``; keyword arguments go to the constructor."""
        if not isinstance(uri, str) or uri.strip().lower() != "memory:":
            raise InvalidRequestError(
                f"InMemoryLightningStore opens only the URI 'memory:', got {uri!r}. Pass options such as "
                "scan_debounce_seconds as keyword arguments: open_store('memory:', scan_debounce_seconds=0)."
            )
        return cls(**kwargs)

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        """Async-safe; thread-safe unless built with ``thread_safe=False``; no zero-copy, no OTLP."""
        return LightningStoreCapabilities(
            thread_safe=self._thread_safe, async_safe=True, zero_copy=False, otlp_traces=False
        )

    async def close(self) -> None:
        """Fail pending and future `wait_for_rollouts` calls with `StoreClosedError`. Idempotent."""
        with self._lock:
            self._closed = True
            self._state.waiters.wake_all()

    async def statistics(self) -> LightningStoreStatistics:
        """Counts of rollouts, attempts, spans, resources and workers, the class name and the uptime."""
        st = self._state
        with self._lock:
            return LightningStoreStatistics(
                name=type(self).__name__,
                total_rollouts=len(st.rollouts),
                total_attempts=st.total_attempts,
                total_spans=st.total_spans,
                total_resources=len(st.resources),
                total_workers=len(st.workers),
                uptime=self._uptime(),
            )

    # ------------------------------------------------------------------ rollouts and attempts

    async def _start_rollout(self, request: q.StartRollout) -> AttemptedRollout:
        """Create a ``preparing`` rollout with attempt #1, not queued (see `LightningStore.start_rollout`)."""
        r = request.rollout
        st = self._state
        with self._lock:
            st.watchdog()
            now = self.clock()
            rec = st.create_rollout(r.input, r.mode, r.resources_id, r.config, r.metadata, "preparing", now)
            return st.new_attempt(rec, now, request.worker_id, dequeue=False)

    async def _enqueue_rollouts(self, request: q.EnqueueRollouts) -> Sequence[Rollout]:
        """Enqueue every checked rollout atomically, in input order."""
        st = self._state
        with self._lock:
            st.watchdog()
            now = self.clock()
            return [
                st.create_rollout(
                    r.input, r.mode, r.resources_id, r.config, r.metadata, "queuing", now
                ).rollout
                for r in request.rollouts
            ]

    async def _dequeue_rollouts(self, request: q.DequeueRollouts) -> Sequence[AttemptedRollout]:
        """Claim up to ``limit`` queued rollouts atomically, in FIFO order."""
        limit, worker_id = request.limit, request.worker_id
        claimed: list[AttemptedRollout] = []
        st = self._state
        with self._lock:
            st.watchdog()
            now = self.clock()
            while len(claimed) < limit:
                rec = st.pop_queued()
                if rec is None:
                    break
                claimed.append(st.new_attempt(rec, now, worker_id, dequeue=True))
            if not claimed and worker_id:
                st.worker_found_nothing(worker_id, now)
        return claimed

    async def _start_attempt(self, request: q.StartAttempt) -> AttemptedRollout:
        """Start a new ``preparing`` attempt on any rollout (manual retry; ignores ``max_attempts``)."""
        st = self._state
        with self._lock:
            st.watchdog()
            rec = st.record(request.rollout_id)
            return st.new_attempt(rec, self.clock(), request.worker_id, dequeue=False)

    async def _query_rollouts(
        self, query: q.RolloutQuery, where: NormalizedFilter
    ) -> PaginatedResult[Rollout | AttemptedRollout]:
        """Rollouts matching the checked query, each with its latest attempt."""
        predicate = build_predicate(where)
        wanted_ids = required_values(where, "rollout_id")
        st = self._state
        with self._lock:
            st.watchdog()
            return st.select_rollouts(
                where, predicate, wanted_ids, query.sort_by, query.sort_order, query.limit, query.offset
            )

    async def _query_attempts(self, query: q.AttemptQuery) -> PaginatedResult[Attempt]:
        """Attempts of one rollout, oldest first by default; empty for an unknown rollout."""
        sort_by, order = query.sort_by, query.sort_order
        st = self._state
        with self._lock:
            st.watchdog()
            rec = st.rollouts.get(query.rollout_id)
            attempts = [] if rec is None else list(rec.attempts)
        if not (sort_by == "sequence_id" and order == "asc"):  # attempts are stored in sequence order
            attempts = sort_items(attempts, sort_by, order, Attempt)
        return paginate(attempts, query.limit, query.offset)

    async def _get_rollout(self, rollout_id: str) -> Rollout | AttemptedRollout | None:
        """The rollout with its latest attempt attached when it has one; None if unknown."""
        st = self._state
        with self._lock:
            st.watchdog()
            rec = st.rollouts.get(rollout_id)
            return None if rec is None else st.view(rec)

    async def _get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        """The attempt with the highest ``sequence_id``, or None."""
        st = self._state
        with self._lock:
            st.watchdog()
            rec = st.rollouts.get(rollout_id)
            return rec.attempts[-1] if rec is not None and rec.attempts else None

    async def _apply_rollout_update(self, update: q.RolloutUpdate) -> Rollout:
        """Replace the given rollout fields; returns the new snapshot (a config of None: the defaults)."""
        changes = update.changes()
        st = self._state
        with self._lock:
            st.watchdog()
            rec = st.record(update.rollout_id)
            if update.status is not UNSET:
                changes["end_time"] = rollout_end_time_for(update.status, self.clock())
            rollout = rec.rollout.model_copy(update=changes)
            st.store_rollout(rec, rollout)
            return rollout

    async def _apply_attempt_update(self, update: q.AttemptUpdate) -> Attempt:
        """Replace the given attempt fields and propagate (see `LightningStore.update_attempt`)."""
        rollout_id, attempt_id = update.rollout_id, update.attempt_id
        st = self._state
        with self._lock:
            st.watchdog()
            rec = st.record(rollout_id)
            if attempt_id == "latest":
                if not rec.attempts:
                    raise AttemptNotFoundError(rollout_id, "latest")
                index = len(rec.attempts) - 1
            else:
                found = rec.attempt_index.get(attempt_id)
                if found is None:
                    raise AttemptNotFoundError(rollout_id, attempt_id)
                index = found
            return st.apply_attempt_update(
                rec,
                index,
                self.clock(),
                update.status,
                update.worker_id,
                update.last_heartbeat_time,
                update.metadata,
            )

    async def wait_for_rollouts(
        self, *, rollout_ids: list[str], timeout: float | None = None
    ) -> list[Rollout]:
        """Wait until the rollouts finish; return those finished by the deadline, in input order.

        Woken by the rollouts' completion, not by polling; only while a waited-for rollout has a
        watchdog deadline does it also wake at most every second so the watchdog can time it out.
        Unknown ids are omitted; ``timeout <= 0`` checks once; None waits indefinitely (real time).
        Raises `StoreClosedError` if the store is or gets closed.
        """
        ids = check_rollout_ids(rollout_ids)
        wait_limit = check_timeout(timeout)
        loop = asyncio.get_running_loop()
        deadline = None if wait_limit is None else time.monotonic() + wait_limit
        st = self._state
        while True:
            with self._lock:
                if self._closed:
                    raise StoreClosedError("The store was closed; wait_for_rollouts cannot wait on it.")
                st.watchdog()
                rollouts = st.rollouts
                pending = [
                    rid
                    for rid in ids
                    if (rec := rollouts.get(rid)) is not None and rec.rollout.status not in _FINISHED
                ]
                remaining = None if deadline is None else deadline - time.monotonic()
                if not pending or (remaining is not None and remaining <= 0):
                    return [
                        rec.rollout
                        for rid in ids
                        if (rec := rollouts.get(rid)) is not None and rec.rollout.status in _FINISHED
                    ]
                watchdog_may_act = any(has_watchdog_deadline(rollouts[rid].rollout.config) for rid in pending)
                waiter = st.waiters.register(loop, pending)
            delay = remaining
            if watchdog_may_act:
                delay = self._wait_poll_seconds if delay is None else min(delay, self._wait_poll_seconds)
            try:
                await asyncio.wait((waiter.future,), timeout=delay)
            finally:
                with self._lock:
                    st.waiters.unregister(waiter)

    # ------------------------------------------------------------------ spans

    async def _insert_spans(self, request: q.AddSpans) -> Sequence[Span]:
        """Store the new spans of the checked batch atomically; returns those inserted."""
        st = self._state
        with self._lock:
            targets: dict[tuple[str, str], tuple[RolloutRecord, int]] = {}
            for span in request.spans:  # every target first: a failed call changes nothing
                pair = (span.rollout_id, span.attempt_id)
                if pair not in targets:
                    rec = st.record(span.rollout_id)
                    index = rec.attempt_index.get(span.attempt_id)
                    if index is None:
                        raise AttemptNotFoundError(span.rollout_id, span.attempt_id)
                    targets[pair] = (rec, index)
            inserted: list[Span] = []
            touched: dict[tuple[RolloutRecord, int], None] = {}
            for span in request.spans:
                target = targets[(span.rollout_id, span.attempt_id)]
                stored = st.insert_span(target[0], span)
                if stored is not None:
                    inserted.append(stored)
                    touched[target] = None
            now = self.clock() if touched else 0.0
            for rec, index in touched:
                st.heartbeat(rec, index, now)
            return inserted

    async def _issue_sequence_ids(self, request: q.SpanSequenceIds) -> Sequence[int]:
        """One sequence id per checked pair, atomically, in input order (ids are not checked to exist)."""
        rollout_ids = [rollout_id for rollout_id, _ in request.pairs]
        with self._lock:
            counters = self._state.sequence_ids
            issued, updated = plan_sequence_ids(rollout_ids, lambda rid: counters.get(rid, 0))
            counters.update(updated)
            return issued

    async def _query_spans(self, query: q.SpanQuery, where: NormalizedFilter) -> PaginatedResult[Span]:
        """Spans of one rollout (only its own spans are read); see `LightningStore.query_spans`."""
        attempt_id = query.attempt_id
        sort_by, order = query.sort_by, query.sort_order
        st = self._state
        with self._lock:
            st.watchdog()
            rec = st.rollouts.get(query.rollout_id)
            if rec is None or (attempt_id == "latest" and not rec.attempts):
                spans: list[Span] = []
            else:
                if attempt_id == "latest":
                    attempt_id = rec.attempts[-1].attempt_id
                spans = st.spans_of(rec, attempt_id)
        # The rollout is fixed by the record; filter the field pool outside the lock.
        if where.conditions and spans:
            predicate = build_predicate(NormalizedFilter(where.conditions, (), where.aggregate))
            spans = [s for s in spans if predicate(s)]
        spans = sort_items(spans, sort_by, order, Span)
        return paginate(spans, query.limit, query.offset)

    # ------------------------------------------------------------------ resources

    def _resources_update(
        self, resources_id: str, resources: NamedResources, create_time: float, now: float, version: int
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
            raise _as_invalid_request("resources (expected a dict of name -> resource)", exc) from None

    async def _add_resources(self, resources: NamedResources) -> ResourcesUpdate:
        """Store a new snapshot under a fresh ``rs-`` id at version 1; it becomes the latest."""
        st = self._state
        with self._lock:
            now = self.clock()
            resources_id = draw_unique_id(new_resources_id, st.resources)
            update = self._resources_update(resources_id, resources, now, now, 1)
            st.resources[resources_id] = update
            st.latest_resources_id = resources_id
            return update

    async def _update_resources(self, request: q.UpdateResources) -> ResourcesUpdate:
        """Upsert a snapshot: version 1 for a new id, else version+1 keeping ``create_time``."""
        resources_id, resources = request.resources_id, request.resources
        st = self._state
        with self._lock:
            st.watchdog()
            now = self.clock()
            previous = st.resources.get(resources_id)
            if previous is None:
                update = self._resources_update(resources_id, resources, now, now, 1)
            else:
                update = self._resources_update(
                    resources_id, resources, previous.create_time, now, previous.version + 1
                )
            st.resources[resources_id] = update  # an update keeps the id's insertion position
            st.latest_resources_id = resources_id
            return update

    async def _get_resources(self, resources_id: str) -> ResourcesUpdate | None:
        """The snapshot with this id, or None."""
        with self._lock:
            return self._state.resources.get(resources_id)

    async def _get_latest_resources(self) -> ResourcesUpdate | None:
        """The most recently added or updated snapshot, or None."""
        st = self._state
        with self._lock:
            latest = st.latest_resources_id
            return None if latest is None else st.resources[latest]

    async def _query_resources(
        self, query: q.ResourcesQuery, where: NormalizedFilter
    ) -> PaginatedResult[ResourcesUpdate]:
        """Snapshots matching both filters (AND), insertion order unless ``sort_by`` is given."""
        predicate = build_predicate(where)
        resources_id, sort_by, limit, offset = query.resources_id, query.sort_by, query.limit, query.offset
        order = validate_sort_order(query.sort_order)
        st = self._state
        with self._lock:
            if resources_id is not None:
                found = st.resources.get(resources_id)
                matched = [] if found is None or not predicate(found) else [found]
            else:
                matched = [r for r in st.resources.values() if predicate(r)]
        return paginate(sort_items(matched, sort_by, order, ResourcesUpdate), limit, offset)

    # ------------------------------------------------------------------ workers

    async def _query_workers(self, query: q.WorkerQuery, where: NormalizedFilter) -> PaginatedResult[Worker]:
        """Workers matching the checked query."""
        predicate = build_predicate(where)
        with self._lock:
            self._state.watchdog()
            matched = [worker for worker in self._state.workers.values() if predicate(worker)]
        return paginate(
            sort_items(matched, query.sort_by, query.sort_order, Worker), query.limit, query.offset
        )

    async def _get_worker(self, worker_id: str) -> Worker | None:
        """The worker with this id, or None."""
        with self._lock:
            return self._state.workers.get(worker_id)

    async def _update_worker(self, request: q.WorkerHeartbeat) -> Worker:
        """Heartbeat: upsert the worker, stamp ``last_heartbeat_time`` and replace the stats if given."""
        st = self._state
        with self._lock:
            st.upsert_worker(
                request.worker_id, worker_updates_for_heartbeat(self.clock(), request.heartbeat_stats)
            )
            return st.workers[request.worker_id]


def estimate_model_size(obj: Any) -> int:
    """A rough size in bytes of a model (or container) and everything it holds, by `sys.getsizeof`.

    Agent Lightning 0.3 used it to decide span eviction; agl's memory store never evicts.
    """
    import sys
    from collections.abc import Mapping

    from pydantic import BaseModel

    if isinstance(obj, BaseModel):
        return sys.getsizeof(obj) + sum(estimate_model_size(value) for value in obj.__dict__.values())
    if isinstance(obj, Mapping):
        return sys.getsizeof(obj) + sum(estimate_model_size(value) for value in obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return sys.getsizeof(obj) + sum(estimate_model_size(value) for value in obj)
    return sys.getsizeof(obj)
