"""The synchronous state behind `InMemoryLightningStore`: records, queue, indexes and write paths.

`MemoryState` holds every collection and implements the store's write paths (rollout status writes,
attempts, heartbeats, spans, workers, the watchdog) as plain synchronous methods. It does no locking
and no argument validation: `InMemoryLightningStore` validates arguments first and calls these
methods while holding its lock, so each call sees and leaves a consistent state. Every stored model is
an immutable snapshot (built by `agl_core.utils.model_slots`); a write replaces it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agl_core.store._memory_index import RolloutIndex, WorkerIndex
from agl_core.store._memory_spans import SpanPacker, StoredSpan
from agl_core.store.base import UNSET, Unset
from agl_core.store.errors import RolloutNotFoundError
from agl_core.store.logic import (
    apply_worker_updates,
    attempt_end_time_for,
    draw_unique_id,
    heartbeat_transition,
    new_attempt_id,
    new_rollout_id,
    next_rollout_status_after_attempt_update,
    rollout_end_time_for,
    scan_unhealthy,
    worker_sync_required,
    worker_updates_for_attempt,
    worker_updates_for_empty_dequeue,
)
from agl_core.store.logic.waiters import WaiterRegistry
from agl_core.types import Attempt, AttemptedRollout, Rollout
from agl_core.types.status import (
    FINISHED_ROLLOUT_STATUSES,
    QUEUING_ROLLOUT_STATUSES,
    RUNNING_ROLLOUT_STATUSES,
)
from agl_core.utils.model_slots import build, replace

if TYPE_CHECKING:
    from agl_core.types import (
        AttemptStatus,
        ResourcesUpdate,
        RolloutConfig,
        RolloutMode,
        RolloutStatus,
        Span,
        Worker,
    )

__all__ = ["MemoryState", "RolloutRecord", "has_watchdog_deadline"]

logger = logging.getLogger("agl_core.store.memory")

_QUEUING = QUEUING_ROLLOUT_STATUSES
_RUNNING = RUNNING_ROLLOUT_STATUSES
_FINISHED = FINISHED_ROLLOUT_STATUSES

_SPAN_IDS_IN_LIST = 32  # an attempt's span ids move from a list to a set past this many
_NOTHING: Any = ()  # shared, never-mutated placeholder for containers a record allocates lazily


class RolloutRecord:
    """Everything the store keeps about one rollout (mutated only under the store lock)."""

    __slots__ = (
        "attempt_index",
        "attempts",
        "in_queue",
        "max_span_seq",
        "order",
        "rollout",
        "span_keys",
        "spans",
        "spans_built",
        "spans_sorted",
        "view",
    )

    def __init__(self, rollout: Rollout, order: int) -> None:
        self.rollout = rollout
        self.order = order  # creation rank: the default (insertion) order of queries
        # The lists start as the shared empty `_NOTHING` and are allocated by the first attempt/span, so
        # a queued rollout costs few objects (fewer allocations, less garbage-collector work).
        self.attempts: list[Attempt] = _NOTHING  # index = sequence_id - 1
        self.attempt_index: dict[str, int] = {}
        self.spans: list[StoredSpan] = _NOTHING  # see `agl_core.store._memory_spans`
        self.spans_built = 0  # spans[:spans_built] hold no rows (a read built them)
        # attempt id -> span ids stored for it: a list while short (a tenth of a set's size), then a set
        self.span_keys: dict[str, list[str] | set[str]] = _NOTHING
        self.max_span_seq = -1
        self.spans_sorted = True  # spans were added in non-decreasing sequence_id order
        self.in_queue = False  # an entry for this rollout is in the queue deque
        self.view: Rollout | None = rollout  # cached rollout-with-latest-attempt; None when stale


def has_watchdog_deadline(config: RolloutConfig) -> bool:
    """True if the watchdog can ever flag a rollout with this config."""
    return config.timeout_seconds is not None or config.unresponsive_seconds is not None


class MemoryState:
    """The collections of one in-memory store and its write paths (callers hold the store's lock).

    Args:
        clock: The store clock ("now" for every timestamp).
        watchdog_due: Returns True when a (debounced) watchdog scan is due.
    """

    def __init__(self, clock: Callable[[], float], watchdog_due: Callable[[], bool]) -> None:
        self.clock = clock
        self.watchdog_due = watchdog_due
        self.rollouts: dict[str, RolloutRecord] = {}
        self.queue: deque[str] = deque()
        self.watched: dict[str, RolloutRecord] = {}  # running rollouts with a watchdog deadline
        self.sequence_ids: dict[str, int] = {}  # last span sequence id issued or seen, per rollout
        self.resources: dict[str, ResourcesUpdate] = {}
        self.latest_resources_id: str | None = None
        self.workers: dict[str, Worker] = {}
        self.rollout_index = RolloutIndex()  # records by rank, status and start time
        self.worker_index = WorkerIndex()  # workers by status
        self.span_packer = SpanPacker()
        self.waiters = WaiterRegistry()
        self.total_attempts = 0
        self.total_spans = 0
        self.next_order = 0

    def watchdog(self) -> None:
        """Run the debounced watchdog scan before a guarded method."""
        if self.watchdog_due() and self.watched:
            now = self.clock()
            watched = self.watched.values()
            flagged = scan_unhealthy(
                ((rec.attempts[-1], rec.rollout.config) for rec in watched if rec.attempts), now
            )
            # Handled (and requeued) in rollout creation order, as in the SQLite store.
            by_creation = sorted(flagged.items(), key=lambda item: self.rollouts[item[0][0]].order)
            for (rollout_id, attempt_id), status in by_creation:
                rec = self.rollouts[rollout_id]
                self.apply_attempt_update(
                    rec, rec.attempt_index[attempt_id], now, status, UNSET, UNSET, UNSET
                )

    def record(self, rollout_id: str) -> RolloutRecord:
        """The record of `rollout_id`; `RolloutNotFoundError` if there is none."""
        rec = self.rollouts.get(rollout_id)
        if rec is None:
            raise RolloutNotFoundError(rollout_id)
        return rec

    def store_rollout(self, rec: RolloutRecord, rollout: Rollout) -> None:
        """Install a new rollout snapshot and keep the queue, indexes and waiters in sync."""
        previous = rec.rollout.status
        rec.rollout = rollout
        rec.view = None if rec.attempts else rollout
        status = rollout.status
        if status != previous:
            self.rollout_index.status_changed(rec.order, previous, status)
        rollout_id = rollout.rollout_id
        if status in _RUNNING and has_watchdog_deadline(rollout.config):
            self.watched[rollout_id] = rec
        elif self.watched:
            self.watched.pop(rollout_id, None)
        if status in _QUEUING:
            if not rec.in_queue:
                self.queue.append(rollout_id)
                rec.in_queue = True
        elif status in _FINISHED:
            if rec.attempts:
                # Built now, while its parts are in the CPU cache: a finished rollout is read (by id, by
                # the trainer) and rarely written again, and building its view on a first read of a
                # random rollout in a large store waits on a dozen cold memory loads.
                self.view(rec)
            self.waiters.rollout_finished(rollout_id)

    def set_rollout_status(self, rec: RolloutRecord, status: str, now: float) -> None:
        """Write a rollout status (and the matching ``end_time``)."""
        self.store_rollout(
            rec, replace(rec.rollout, {"status": status, "end_time": rollout_end_time_for(status, now)})
        )

    def create_rollout(
        self,
        input: Any,
        mode: RolloutMode | None,
        resources_id: str | None,
        config: RolloutConfig,
        metadata: dict[str, Any] | None,
        status: RolloutStatus,
        now: float,
    ) -> RolloutRecord:
        """Create a rollout under a fresh id (queued if `status` is a queuing status)."""
        rollout_id = draw_unique_id(new_rollout_id, self.rollouts)
        rollout = build(
            Rollout,
            {
                "rollout_id": rollout_id,
                "input": input,
                "start_time": now,
                "end_time": None,
                "mode": mode,
                "resources_id": self.latest_resources_id if resources_id is None else resources_id,
                "status": status,
                "config": config,
                "metadata": metadata,
            },
        )
        rec = RolloutRecord(rollout, self.next_order)
        self.next_order += 1
        self.rollouts[rollout_id] = rec
        self.rollout_index.add(rec)
        if status in _QUEUING:
            self.queue.append(rollout_id)
            rec.in_queue = True
        return rec

    def view(self, rec: RolloutRecord) -> Rollout:
        """The rollout, as an `AttemptedRollout` with its latest attempt when it has one (cached)."""
        view = rec.view
        if view is None:
            values = rec.rollout.__dict__.copy()
            values["attempt"] = rec.attempts[-1]
            view = rec.view = build(AttemptedRollout, values)
        return view

    def upsert_worker(self, worker_id: str, updates: dict[str, Any]) -> None:
        """Create the worker or replace its snapshot with `updates` applied."""
        workers = self.workers
        worker = workers.get(worker_id)
        stored = workers[worker_id] = (
            apply_worker_updates(None, worker_id, updates) if worker is None else replace(worker, updates)
        )
        self.worker_index.stored(worker_id, None if worker is None else worker.status, stored.status)

    def worker_found_nothing(self, worker_id: str, now: float) -> None:
        """Book an empty dequeue for the worker (it becomes ``idle``)."""
        current = self.workers.get(worker_id)
        updates = worker_updates_for_empty_dequeue(None if current is None else current.status, now)
        self.upsert_worker(worker_id, updates)

    def new_attempt(
        self, rec: RolloutRecord, now: float, worker_id: str | None, *, dequeue: bool
    ) -> AttemptedRollout:
        """Append a ``preparing`` attempt, move the rollout to ``preparing`` and book the worker."""
        rollout_id = rec.rollout.rollout_id
        attempt_id = draw_unique_id(new_attempt_id, rec.attempt_index)
        attempts = rec.attempts
        if attempts is _NOTHING:
            attempts = rec.attempts = []
        attempt = build(
            Attempt,
            {
                "rollout_id": rollout_id,
                "attempt_id": attempt_id,
                "sequence_id": len(attempts) + 1,
                "start_time": now,
                "end_time": None,
                "status": "preparing",
                "worker_id": worker_id,
                "last_heartbeat_time": None,
                "metadata": None,
            },
        )
        rec.attempt_index[attempt_id] = len(attempts)
        attempts.append(attempt)
        self.total_attempts += 1
        self.store_rollout(rec, replace(rec.rollout, {"status": "preparing", "end_time": None}))
        if worker_id:
            updates = worker_updates_for_attempt("preparing", rollout_id, attempt_id, now, dequeue=dequeue)
            self.upsert_worker(worker_id, updates)
        return self.view(rec)  # type: ignore[return-value]

    def pop_queued(self) -> RolloutRecord | None:
        """The oldest queued rollout still ``queuing``/``requeuing``, removed from the queue."""
        queue = self.queue
        rollouts = self.rollouts
        while queue:
            rec = rollouts[queue.popleft()]
            rec.in_queue = False
            if rec.rollout.status in _QUEUING:
                return rec
        return None

    def apply_attempt_update(
        self,
        rec: RolloutRecord,
        index: int,
        now: float,
        status: AttemptStatus | Unset,
        worker_id: str | Unset | None,
        last_heartbeat_time: float | Unset | None,
        metadata: dict[str, Any] | Unset | None,
    ) -> Attempt:
        """The `update_attempt` write path (also used by the watchdog); arguments are already valid."""
        attempt = rec.attempts[index]
        changes: dict[str, Any] = {}
        if status is not UNSET:
            changes["status"] = status
            changes["end_time"] = attempt_end_time_for(status, now)  # type: ignore[arg-type]
        if worker_id is not UNSET:
            changes["worker_id"] = worker_id
        if last_heartbeat_time is not UNSET:
            changes["last_heartbeat_time"] = last_heartbeat_time
        if metadata is not UNSET:
            changes["metadata"] = metadata
        is_latest = index == len(rec.attempts) - 1
        if changes:
            attempt = rec.attempts[index] = replace(attempt, changes)
            if is_latest:
                rec.view = None
        if status is not UNSET:
            new_status = next_rollout_status_after_attempt_update(
                rec.rollout,
                attempt,
                status,  # type: ignore[arg-type]
                is_latest=is_latest,
            )
            if new_status is not None:
                self.set_rollout_status(rec, new_status, now)
        attempt_worker = attempt.worker_id
        if attempt_worker and worker_sync_required(worker_id, status, attempt_worker):
            self.upsert_worker(
                attempt_worker,
                worker_updates_for_attempt(attempt.status, attempt.rollout_id, attempt.attempt_id, now),
            )
        return attempt

    def heartbeat(self, rec: RolloutRecord, index: int, now: float) -> None:
        """A span arrived for ``rec.attempts[index]``: refresh the heartbeat and apply fix 1."""
        attempt = rec.attempts[index]
        is_latest = index == len(rec.attempts) - 1
        new_status, rollout_status = heartbeat_transition(
            rec.rollout.status, attempt.status, is_latest=is_latest
        )
        if new_status == attempt.status:
            changes: dict[str, Any] = {"last_heartbeat_time": now}
        else:
            changes = {
                "last_heartbeat_time": now,
                "status": new_status,
                "end_time": attempt_end_time_for(new_status, now),
            }
        rec.attempts[index] = replace(attempt, changes)
        if is_latest:
            rec.view = None
        if rollout_status is not None:
            self.set_rollout_status(rec, rollout_status, now)

    def insert_spans(self, rec: RolloutRecord, index: int, spans: Sequence[Span]) -> list[Span]:
        """Store `spans` of ``rec.attempts[index]`` in order; returns those stored (a span id already
        taken in the attempt, earlier in `spans` included, is skipped)."""
        attempt_id = rec.attempts[index].attempt_id
        rollout_id = rec.rollout.rollout_id
        keys = rec.span_keys
        if keys is _NOTHING:
            keys = rec.span_keys = {}
            rec.spans = []
        ids = keys.get(attempt_id)
        if ids is None:
            ids = keys[attempt_id] = []
        kept = rec.spans
        pack = self.span_packer.pack
        max_seq = rec.max_span_seq
        inserted: list[Span] = []
        for span in spans:
            span_id = span.span_id
            if span_id in ids:
                logger.debug("Duplicated span ignored: %s %s %s", rollout_id, attempt_id, span_id)
                continue
            if ids.__class__ is list:
                if len(ids) < _SPAN_IDS_IN_LIST:
                    ids.append(span_id)
                else:
                    ids = keys[attempt_id] = {*ids, span_id}
            else:
                ids.add(span_id)  # type: ignore[union-attr]
            kept.append(pack(span, rollout_id, attempt_id))
            seq = span.sequence_id
            if seq < max_seq:
                rec.spans_sorted = False
            else:
                max_seq = seq
            inserted.append(span)
        if inserted:
            rec.max_span_seq = max_seq
            counters = self.sequence_ids
            if max_seq > counters.get(rollout_id, 0):
                counters[rollout_id] = max_seq
            self.total_spans += len(inserted)
        return inserted
