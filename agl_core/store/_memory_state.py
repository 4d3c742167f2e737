"""The synchronous state behind `InMemoryLightningStore`: records, queue, indexes and write paths.

`MemoryState` holds every collection and implements the store's write paths (rollout status writes,
attempts, heartbeats, spans, workers, the watchdog) and its paged rollout and worker queries as plain
synchronous methods. It does no locking and no argument validation: `InMemoryLightningStore`
validates arguments first and calls these methods while holding its lock, so each call sees and leaves
a consistent state. Every stored model is an immutable snapshot (``model_construct`` of valid values);
a write replaces it with ``model_copy(update=...)``.

Indexes, where a query would otherwise scan every rollout of a large store: rollouts and workers by
status (dicts of id -> record, so a status move is O(1)); status queries sort only their matches into
creation order.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any

from agl_core.store.base import UNSET, Unset
from agl_core.store.errors import RolloutNotFoundError
from agl_core.store.logic import (
    NormalizedFilter,
    apply_worker_updates,
    attempt_end_time_for,
    draw_unique_id,
    heartbeat_transition,
    new_attempt_id,
    new_rollout_id,
    next_rollout_status_after_attempt_update,
    number_span,
    page_result,
    rollout_end_time_for,
    scan_unhealthy,
    sort_key_for,
    worker_sync_required,
    worker_updates_for_attempt,
    worker_updates_for_empty_dequeue,
)
from agl_core.store.logic.waiters import WaiterRegistry
from agl_core.types import Attempt, AttemptedRollout, PaginatedResult, Rollout, Worker
from agl_core.types.status import (
    FINISHED_ROLLOUT_STATUSES,
    QUEUING_ROLLOUT_STATUSES,
    RUNNING_ROLLOUT_STATUSES,
)

if TYPE_CHECKING:
    from agl_core.types import (
        AttemptStatus,
        ResourcesUpdate,
        RolloutConfig,
        RolloutMode,
        RolloutStatus,
        Span,
    )

__all__ = ["MemoryState", "RolloutRecord", "has_watchdog_deadline", "required_values"]

logger = logging.getLogger("agl_core.store.memory")

_QUEUING = QUEUING_ROLLOUT_STATUSES
_RUNNING = RUNNING_ROLLOUT_STATUSES
_FINISHED = FINISHED_ROLLOUT_STATUSES


class RolloutRecord:
    """Everything the store keeps about one rollout (mutated only under the store lock)."""

    __slots__ = ("attempt_index", "attempts", "in_queue", "order", "rollout", "span_ids", "spans", "view")

    def __init__(self, rollout: Rollout, order: int) -> None:
        self.rollout = rollout
        self.order = order  # creation rank: the default (insertion) order of queries
        self.attempts: list[Attempt] = []  # index = sequence_id - 1
        self.attempt_index: dict[str, int] = {}
        self.spans: list[Span] = []  # in the order they were added
        self.span_ids: dict[str, set[str]] = {}  # attempt id -> its span ids (de-duplication)
        self.in_queue = False  # an entry for this rollout is in the queue deque
        self.view: Rollout | None = rollout  # cached rollout-with-latest-attempt; None when stale


def required_values(normalized: NormalizedFilter, field: str) -> frozenset[str] | None:
    """Values of `field` every match of `normalized` must have (a required within-test), else None."""
    if normalized.aggregate != "and" and len(normalized.conditions) != 1:
        return None
    for cond in normalized.conditions:
        if cond.field == field and cond.op == "within" and isinstance(cond.value, frozenset):
            return cond.value
    return None


def _page(items: list[Any], limit: int, offset: int) -> list[Any]:
    return items[offset:] if limit == -1 else items[offset : offset + limit]


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
        self.rollouts_by_status: dict[str, dict[str, RolloutRecord]] = {}
        self.waiters = WaiterRegistry()
        self.total_attempts = 0
        self.total_spans = 0
        self.next_order = 0
        # True while rollouts were created in non-decreasing start_time order (the store clock did not
        # step back): creation order is then start-time order, and that sort reads no more than a page
        self.start_times_ordered = True
        self.last_start_time = float("-inf")

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
        rollout_id = rollout.rollout_id
        if status != previous:
            del self.rollouts_by_status[previous][rollout_id]
            self.rollouts_by_status.setdefault(status, {})[rollout_id] = rec
        if status in _RUNNING and has_watchdog_deadline(rollout.config):
            self.watched[rollout_id] = rec
        elif self.watched:
            self.watched.pop(rollout_id, None)
        if status in _QUEUING:
            if not rec.in_queue:
                self.queue.append(rollout_id)
                rec.in_queue = True
        elif status in _FINISHED:
            self.waiters.rollout_finished(rollout_id)

    def set_rollout_status(self, rec: RolloutRecord, status: str, now: float) -> None:
        """Write a rollout status (and the matching ``end_time``)."""
        self.store_rollout(
            rec,
            rec.rollout.model_copy(update={"status": status, "end_time": rollout_end_time_for(status, now)}),
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
        rollout = Rollout.model_construct(
            rollout_id=rollout_id,
            input=input,
            start_time=now,
            end_time=None,
            mode=mode,
            resources_id=self.latest_resources_id if resources_id is None else resources_id,
            status=status,
            config=config,
            metadata=metadata,
        )
        rec = RolloutRecord(rollout, self.next_order)
        self.next_order += 1
        if now < self.last_start_time:
            self.start_times_ordered = False
        self.last_start_time = now
        self.rollouts[rollout_id] = rec
        self.rollouts_by_status.setdefault(status, {})[rollout_id] = rec
        if status in _QUEUING:
            self.queue.append(rollout_id)
            rec.in_queue = True
        return rec

    def view(self, rec: RolloutRecord) -> Rollout:
        """The rollout, as an `AttemptedRollout` with its latest attempt when it has one (cached)."""
        view = rec.view
        if view is None:
            view = rec.view = AttemptedRollout.model_construct(
                **rec.rollout.__dict__, attempt=rec.attempts[-1]
            )
        return view

    def upsert_worker(self, worker_id: str, updates: dict[str, Any]) -> None:
        """Create the worker or replace its snapshot with `updates` applied."""
        worker = self.workers.get(worker_id)
        self.workers[worker_id] = (  # a dict keeps a key's position: workers stay in creation order
            apply_worker_updates(None, worker_id, updates)
            if worker is None
            else worker.model_copy(update=updates)
        )

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
        attempt = Attempt.model_construct(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            sequence_id=len(attempts) + 1,
            start_time=now,
            end_time=None,
            status="preparing",
            worker_id=worker_id,
            last_heartbeat_time=None,
            metadata=None,
        )
        rec.attempt_index[attempt_id] = len(attempts)
        attempts.append(attempt)
        self.total_attempts += 1
        self.store_rollout(rec, rec.rollout.model_copy(update={"status": "preparing", "end_time": None}))
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
            attempt = rec.attempts[index] = attempt.model_copy(update=changes)
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
        rec.attempts[index] = attempt.model_copy(update=changes)
        if is_latest:
            rec.view = None
        if rollout_status is not None:
            self.set_rollout_status(rec, rollout_status, now)

    def insert_span(self, rec: RolloutRecord, span: Span) -> Span | None:
        """Store `span` (numbered when its sequence id is 0); None when its id is taken in its attempt."""
        rollout_id, attempt_id = span.rollout_id, span.attempt_id
        ids = rec.span_ids.setdefault(attempt_id, set())
        if span.span_id in ids:
            logger.debug("Duplicated span ignored: %s %s %s", rollout_id, attempt_id, span.span_id)
            return None
        ids.add(span.span_id)
        counter = self.sequence_ids.get(rollout_id, 0)
        if span.sequence_id:
            counter = max(counter, span.sequence_id)
        else:
            counter += 1
            span = number_span(span, counter)
        self.sequence_ids[rollout_id] = counter
        rec.spans.append(span)
        self.total_spans += 1
        return span

    @staticmethod
    def spans_of(rec: RolloutRecord, attempt_id: str | None) -> list[Span]:
        """A new list of the rollout's spans (of one attempt, unless `attempt_id` is None), as added."""
        if attempt_id is None:
            return list(rec.spans)
        return [span for span in rec.spans if span.attempt_id == attempt_id]

    def select_rollouts(
        self,
        where: NormalizedFilter,
        predicate: Callable[[Any], bool],
        wanted_ids: frozenset[str] | None,
        sort_by: str | None,
        order: str,
        limit: int,
        offset: int,
    ) -> PaginatedResult[Rollout]:
        """The page of rollouts (as views) matching `where`, with the total number of matches."""
        rollouts = self.rollouts
        if sort_by == "start_time" and where.matches_all and self.start_times_ordered:
            ordered = iter(rollouts.values()) if order == "asc" else _newest_first(rollouts)
            stop = None if limit == -1 else offset + limit
            page = [self.view(rec) for rec in islice(ordered, offset, stop)]
            return page_result(page, limit, offset, len(rollouts))
        candidates: Any
        statuses = required_values(where, "status") if wanted_ids is None else None
        if wanted_ids is not None:
            candidates = sorted((rollouts[i] for i in wanted_ids if i in rollouts), key=_order)
        elif statuses is not None:
            groups = self.rollouts_by_status
            candidates = sorted((rec for s in statuses for rec in groups.get(s, {}).values()), key=_order)
        else:
            candidates = rollouts.values()
        matched = [rec for rec in candidates if predicate(rec.rollout)]
        if sort_by is not None:
            key = sort_key_for(sort_by, Rollout)
            matched.sort(key=lambda rec: key(rec.rollout), reverse=order == "desc")
        page = [self.view(rec) for rec in _page(matched, limit, offset)]
        return page_result(page, limit, offset, len(matched))


def _order(rec: RolloutRecord) -> int:
    return rec.order


def _newest_first(rollouts: dict[str, RolloutRecord]) -> Iterator[RolloutRecord]:
    """Records created in start-time order, newest start first; equal start times keep creation order
    (as a stable descending sort does)."""
    group: list[RolloutRecord] = []
    for rec in reversed(rollouts.values()):
        if group and rec.rollout.start_time != group[-1].rollout.start_time:
            yield from reversed(group)
            group = []
        group.append(rec)
    yield from reversed(group)
