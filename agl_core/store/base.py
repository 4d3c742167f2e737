"""The `LightningStore` contract: the queue and single source of truth between algorithms and runners.

Every backend (in-memory, SQLite, the HTTP client, MongoDB, third-party plugins) subclasses
`LightningStore` and passes the same conformance suite (`agl_testing.store_conformance`, in the
agl-testing distribution). The semantics that are not backend-specific live in `agl_core.store.logic`,
which the bundled backends call so that they behave identically.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict, TypeVar, final

from agl_core.store.errors import InvalidRequestError
from agl_core.store.logic.checks import check_optional_str, validate_span
from agl_core.store.logic.filters import NormalizedFilter, resolve_rollout_query_aliases
from agl_core.store.logic.queries import (
    check_add_spans,
    check_attempt_query,
    check_attempt_update,
    check_dequeue_rollouts,
    check_enqueue_rollouts,
    check_id,
    check_new_rollout,
    check_resources_query,
    check_rollout_query,
    check_rollout_update,
    check_sequence_ids,
    check_span_query,
    check_start_attempt,
    check_start_rollout,
    check_update_resources,
    check_worker_heartbeat,
    check_worker_query,
)
from agl_core.store.logic.watchdog import ScanDebouncer
from agl_core.types.queries import (
    AddSpans,
    AttemptQuery,
    AttemptUpdate,
    DequeueRollouts,
    EnqueueRollouts,
    ResourcesQuery,
    RolloutQuery,
    RolloutUpdate,
    SpanQuery,
    SpanSequenceIds,
    StartAttempt,
    StartRollout,
    UpdateResources,
    WorkerHeartbeat,
    WorkerQuery,
)
from agl_core.types.unset import UNSET, Unset

if TYPE_CHECKING:
    from types import TracebackType

    from opentelemetry.sdk.trace import ReadableSpan

    from agl_core.types import (
        Attempt,
        AttemptedRollout,
        AttemptStatus,
        EnqueueRolloutRequest,
        NamedResources,
        PaginatedResult,
        ResourcesUpdate,
        Rollout,
        RolloutConfig,
        RolloutMode,
        RolloutStatus,
        Span,
        Worker,
        WorkerStatus,
    )

__all__ = [
    "UNSET",
    "LightningStore",
    "LightningStoreCapabilities",
    "LightningStoreStatistics",
    "Unset",
]

_StoreT = TypeVar("_StoreT", bound="LightningStore")


class LightningStoreCapabilities(TypedDict, total=False):
    """What a store supports. Every key is optional; a missing key means False."""

    thread_safe: bool
    """Methods may be called concurrently from several threads (each on its own event loop)."""
    async_safe: bool
    """Methods may be called concurrently from many tasks of one event loop."""
    zero_copy: bool
    """All threads/processes share one copy of the data (a server or a database, not a process-local copy)."""
    otlp_traces: bool
    """The store accepts OTLP/HTTP traces at `otlp_traces_endpoint()`."""


class _StatisticsRequired(TypedDict):
    name: str
    total_rollouts: int
    total_attempts: int
    total_spans: int
    total_resources: int
    total_workers: int
    uptime: float


class LightningStoreStatistics(_StatisticsRequired, total=False):
    """Counters returned by `LightningStore.statistics()`.

    Always present: `name` (the store class name), `total_rollouts`, `total_attempts`, `total_spans`,
    `total_resources`, `total_workers`, `uptime` (seconds since the store was created, per its clock).
    Optional, backend-specific: the in-memory span accounting keys and the SQLite file size.
    """

    total_span_bytes: int
    eviction_threshold_bytes: int
    safe_threshold_bytes: int
    memory_capacity_bytes: int
    database_bytes: int


class LightningStore(abc.ABC):
    """Contract of a store: the rollout queue, attempts, spans, versioned resources and workers.

    **Two levels.** The public query and update methods (`query_rollouts`, `query_spans`,
    `query_workers`, `update_rollout`, `update_attempt`) are final: each checks its arguments once
    (`agl_core.store.logic.queries`) and hands a typed request (`agl_core.types.queries`) to a narrow
    backend method (`_query_rollouts`, `_query_spans`, `_query_workers`, `_apply_rollout_update`,
    `_apply_attempt_update`). A backend implements those and the other abstract methods. A store
    written for Agent Lightning 0.3, which overrides public methods instead, derives from
    ``agl_legacy.store.LightningStore03`` (the agl-legacy plugin).

    All methods are coroutines except the `capabilities` property, `otlp_traces_endpoint()` and
    `from_uri()`. Every call must appear atomic to concurrent callers.

    **Statuses.** A rollout is ``queuing``/``requeuing`` (in the FIFO queue), ``preparing``/``running``
    (held by a runner) or ``failed``/``succeeded``/``cancelled`` (finished). It mirrors its *latest*
    attempt (highest ``sequence_id``) through `agl_core.types.status.rollout_status_from_attempt`:
    ``preparing``/``running``/``succeeded`` carry over; ``failed``/``timeout``/``unresponsive`` become
    ``requeuing`` when listed in ``config.retry_condition`` and ``sequence_id < config.max_attempts``,
    else ``failed``. Updates to older attempts never propagate. Entering ``queuing``/``requeuing`` by any
    path appends the rollout to the queue unless it is already there; dequeue skips queued ids whose
    rollout is no longer queuing/requeuing. ``Rollout.end_time`` is set to now whenever a finished
    status is written and cleared when a non-finished one is written.

    **Deliberate fixes of Agent Lightning 0.3 quirks** (docs/migrating-from-agent-lightning.md §7):

    1. A span moves the latest attempt from ``preparing``/``unresponsive`` to ``running`` and its
       rollout from ``queuing``/``requeuing``/``preparing`` to ``running`` (0.3 misspelled "queueing",
       so a ``queuing`` rollout stayed put). A span for an attempt that is ``failed``, ``succeeded`` or
       ``timeout`` only refreshes ``last_heartbeat_time`` and never moves the rollout.
    2. A finished rollout is changed only by an explicit `update_rollout()` (or a manual
       `start_attempt()`); later attempt updates, spans and the watchdog leave it alone (0.3 let a
       cancelled rollout turn into succeeded when its runner finished).
    3. ``Attempt.end_time`` is set to now for every terminal attempt status (``failed``, ``succeeded``,
       ``timeout``, ``unresponsive``), not only failed/succeeded, and cleared when the attempt goes back
       to ``preparing``/``running``.
    4. A filter with ``filter_logic="or"`` and no other condition matches everything (0.3's in-memory
       store returned nothing).
    5. ``*_contains`` filters are case-sensitive substring matches in every backend.

    **Watchdog.** Before the methods listed in `agl_core.store.logic.WATCHDOG_GUARDED_METHODS` the
    store scans rollouts in ``preparing``/``running`` whose latest attempt is ``preparing``/``running``:
    ``now - attempt.start_time > timeout_seconds`` flags ``timeout``; otherwise
    ``now - (last_heartbeat_time or start_time) > unresponsive_seconds`` flags ``unresponsive``. Each
    flagged attempt then goes through the normal `update_attempt` path (propagation, requeue, worker
    sync). Scans are debounced to one per ``scan_debounce_seconds`` (0 disables debouncing; the first
    scan is allowed at once).

    **Workers.** Every attempt write that carries a worker id (dequeue, `start_rollout`,
    `start_attempt`, `update_attempt` with a worker or with a status on an attempt that has one)
    upserts that worker: attempt ``succeeded``/``failed`` -> ``idle``; ``timeout``/``unresponsive`` ->
    ``unknown`` (both clear the current ids and stamp ``last_idle_time``); otherwise ``busy`` with
    ``current_rollout_id``/``current_attempt_id`` and ``last_busy_time``. A dequeue also stamps
    ``last_dequeue_time``; a dequeue that finds nothing marks the worker ``idle``. See
    `agl_core.store.logic.worker_updates_for_attempt`.

    **Queries.** ``limit=-1`` means no limit; ``limit`` must otherwise be > 0 and ``offset`` >= 0
    (`InvalidRequestError`). Results are `PaginatedResult`s: iterate them like lists; ``total`` counts
    every match. Sorting by a ``*_time`` field treats None as +infinity (last ascending, first
    descending); without ``sort_by`` the order is deterministic (insertion order).

    **Errors.** Unknown ids raise `RolloutNotFoundError`/`AttemptNotFoundError` (both `KeyError` and
    `ValueError`); invalid statuses, filters, pagination and spans raise `InvalidRequestError`
    subclasses (`ValueError`). A failed call leaves the store unchanged. After `close()` calls may
    raise `StoreClosedError`.

    Args:
        clock: Returns "now" in seconds since the epoch. Every timestamp the store writes (start, end,
            heartbeat, worker and resources times, uptime) and the watchdog use it, so tests drive
            timeouts by advancing a fake clock instead of sleeping. Waiting in `wait_for_rollouts` uses
            real time.
        scan_debounce_seconds: Minimum seconds (per the clock) between two watchdog scans; 0 scans
            before every guarded call.
    """

    def __init__(
        self, *, clock: Callable[[], float] = time.time, scan_debounce_seconds: float = 10.0
    ) -> None:
        if scan_debounce_seconds < 0:
            raise InvalidRequestError(
                f"scan_debounce_seconds must be >= 0, got {scan_debounce_seconds!r}; "
                "use 0 to scan before every call."
            )
        self.clock: Callable[[], float] = clock
        self.scan_debounce_seconds: float = float(scan_debounce_seconds)
        self._launch_time: float = clock()
        self._scan_debouncer = ScanDebouncer(self.scan_debounce_seconds, clock)

    def _watchdog_due(self) -> bool:
        """True if the caller must run a watchdog scan now (at most one per ``scan_debounce_seconds``)."""
        return self._scan_debouncer.should_scan()

    def _uptime(self) -> float:
        """Seconds since the store was created, per its clock (the ``uptime`` statistic)."""
        return self.clock() - self._launch_time

    # ------------------------------------------------------------------ the two levels

    async def _execute(self, request: Any) -> Any:
        """Run a typed request as its public method does: the one check, then the backend method.

        The REST handlers pass parsed requests here, and the batch methods their requests: an empty
        batch (or ``limit <= 0``) answers ``[]`` without reaching the backend.
        """
        check, backend = _REQUESTS[type(request)]
        checked = check(request)
        if isinstance(request, (RolloutQuery, SpanQuery, WorkerQuery, ResourcesQuery)):
            return await getattr(self, backend)(request, checked)
        if isinstance(checked, DequeueRollouts) and checked.limit <= 0:
            return []
        if isinstance(checked, EnqueueRollouts) and not checked.rollouts:
            return []
        if isinstance(checked, AddSpans) and not checked.spans:
            return []
        if isinstance(checked, SpanSequenceIds) and not checked.pairs:
            return []
        return await getattr(self, backend)(checked)

    # ------------------------------------------------------------------ lifecycle and introspection

    @classmethod
    def from_uri(cls: type[_StoreT], uri: str, **kwargs: Any) -> _StoreT:
        """Open a store of this class from a URI (``memory:``, ``sqlite:///path.db``, ...).

        `agl_core.store.open_store` calls this on the class registered for the URI's scheme. Extra
        keyword arguments go to the constructor. Expensive setup may be deferred to the first call.
        """
        raise NotImplementedError(
            f"{cls.__name__} cannot be opened from a URI ({uri!r}); construct it directly."
        )

    async def close(self) -> None:
        """Release connections, files and background tasks. Idempotent; the default does nothing."""
        return None

    async def __aenter__(self: _StoreT) -> _StoreT:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        """What this store supports; the default claims nothing."""
        return LightningStoreCapabilities(
            thread_safe=False, async_safe=False, zero_copy=False, otlp_traces=False
        )

    def otlp_traces_endpoint(self) -> str:
        """The OTLP/HTTP traces URL (usually ending in ``/v1/traces``) when ``capabilities["otlp_traces"]``.

        Spans sent there carry rollout id, attempt id and optionally sequence id in their resource.
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not accept OTLP traces (capabilities['otlp_traces'] is False); "
            "serve it with `agl store serve` and use the HTTP store instead."
        )

    async def statistics(self) -> LightningStoreStatistics:
        """Counts of rollouts, attempts, spans, resources and workers, the class name and the uptime.

        Not abstract (a store written for Agent Lightning 0.3, which had no `statistics`, still
        instantiates): the default counts through the query methods, one `query_attempts` and one
        `query_spans` per rollout. Backends override it with their own counters.
        """
        rollouts = await self.query_rollouts()
        attempts = spans = 0
        for rollout in rollouts:
            attempts += len(await self.query_attempts(rollout.rollout_id))
            spans += len(await self.query_spans(rollout.rollout_id))
        return LightningStoreStatistics(
            name=type(self).__name__,
            total_rollouts=len(rollouts),
            total_attempts=attempts,
            total_spans=spans,
            total_resources=len(await self.query_resources()),
            total_workers=len(await self.query_workers()),
            uptime=self._uptime() if hasattr(self, "_launch_time") else 0.0,
        )

    # ------------------------------------------------------------------ rollouts and attempts

    @final
    async def start_rollout(
        self,
        input: Any,
        mode: RolloutMode | None = None,
        resources_id: str | None = None,
        config: RolloutConfig | None = None,
        metadata: dict[str, Any] | None = None,
        worker_id: str | None = None,
    ) -> AttemptedRollout:
        """Create a rollout in ``preparing`` together with attempt #1, without queueing it.

        ``resources_id=None`` resolves to the latest resources (None if there are none); a given id is
        stored as is. ``config`` defaults to a fresh `RolloutConfig`; ``config`` and ``metadata`` are
        copied. With a ``worker_id`` the attempt records it and the worker becomes ``busy``.
        """
        rollout = check_new_rollout(input, mode, resources_id, config, metadata)
        return await self._start_rollout(StartRollout(rollout, check_optional_str("worker_id", worker_id)))

    @abc.abstractmethod
    async def _start_rollout(self, request: StartRollout) -> AttemptedRollout:
        """Backend of `start_rollout`: `request` is checked (`logic.check_start_rollout`)."""

    @final
    async def enqueue_rollout(
        self,
        input: Any,
        mode: RolloutMode | None = None,
        resources_id: str | None = None,
        config: RolloutConfig | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Rollout:
        """Create a rollout in ``queuing`` at the tail of the FIFO queue, with no attempt.

        Defaults as in `start_rollout()`.
        """
        rollout = check_new_rollout(input, mode, resources_id, config, metadata)
        (created,) = await self._enqueue_rollouts(EnqueueRollouts([rollout]))
        return created

    @final
    async def enqueue_many_rollouts(self, rollouts: Sequence[EnqueueRolloutRequest]) -> Sequence[Rollout]:
        """Enqueue several rollouts atomically (all are checked first); the result and the queue keep the
        input order."""
        created: Sequence[Rollout] = await self._execute(EnqueueRollouts(rollouts))
        return created

    @abc.abstractmethod
    async def _enqueue_rollouts(self, request: EnqueueRollouts) -> Sequence[Rollout]:
        """Backend of `enqueue_rollout` and `enqueue_many_rollouts`: `request` is checked
        (`logic.check_enqueue_rollouts`) and holds at least one rollout; create them in one atomic step."""

    @final
    async def dequeue_rollout(self, worker_id: str | None = None) -> AttemptedRollout | None:
        """Claim the oldest queued rollout without blocking; None when the queue is empty.

        The rollout moves to ``preparing`` and gets a new ``preparing`` attempt with
        ``sequence_id = number of existing attempts + 1``. Queued ids whose rollout is no longer
        ``queuing``/``requeuing`` are dropped silently. A rollout is handed out once per queue entry,
        even under concurrent dequeues. Worker bookkeeping as described on the class.
        """
        claimed = await self._dequeue_rollouts(DequeueRollouts(1, check_optional_str("worker_id", worker_id)))
        return claimed[0] if claimed else None

    @final
    async def dequeue_many_rollouts(
        self, *, limit: int = 1, worker_id: str | None = None
    ) -> Sequence[AttemptedRollout]:
        """Claim up to ``limit`` rollouts in FIFO order (``limit <= 0`` returns ``[]``), atomically.

        The worker is associated with the last claimed attempt; it becomes ``idle`` only when nothing
        was claimed.
        """
        claimed: Sequence[AttemptedRollout] = await self._execute(DequeueRollouts(limit, worker_id))
        return claimed

    @abc.abstractmethod
    async def _dequeue_rollouts(self, request: DequeueRollouts) -> Sequence[AttemptedRollout]:
        """Backend of `dequeue_rollout` and `dequeue_many_rollouts`: `request` is checked
        (`logic.check_dequeue_rollouts`) with ``limit >= 1``."""

    @final
    async def start_attempt(self, rollout_id: str, worker_id: str | None = None) -> AttemptedRollout:
        """Create a new ``preparing`` attempt (manual retry) and move the rollout to ``preparing``.

        Ignores ``config.max_attempts`` and works on any rollout, finished ones included (this is an
        explicit request; ``end_time`` is cleared). Raises `RolloutNotFoundError` for an unknown id.
        """
        return await self._start_attempt(check_start_attempt(StartAttempt(rollout_id, worker_id)))

    @abc.abstractmethod
    async def _start_attempt(self, request: StartAttempt) -> AttemptedRollout:
        """Backend of `start_attempt`: `request` is checked (`logic.check_start_attempt`)."""

    @final
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
        """Rollouts matching the filters, each with its latest attempt when it has one.

        The given conditions (``status_in``, ``rollout_id_in``, ``rollout_id_contains`` and, new in
        agl, ``mode_in``: rollouts of these modes, ``input_contains``: text in the input's compact JSON,
        ASCII letters in either case) are combined with ``filter_logic``; with no condition every
        rollout matches, for "and" and "or" alike.
        ``status``/``rollout_ids`` are deprecated aliases of ``status_in``/``rollout_id_in``: they emit
        a `DeprecationWarning` and lose to the new names when both are given. Invalid statuses raise
        `InvalidStatusError`.
        """
        statuses, ids = resolve_rollout_query_aliases(status_in, rollout_id_in, status, rollout_ids)
        query = RolloutQuery(
            statuses,
            ids,
            rollout_id_contains,
            filter_logic,
            sort_by,
            sort_order,
            limit,
            offset,
            mode_in,
            input_contains,
        )
        return await self._query_rollouts(query, check_rollout_query(query))

    @abc.abstractmethod
    async def _query_rollouts(
        self, query: RolloutQuery, where: NormalizedFilter
    ) -> PaginatedResult[Rollout | AttemptedRollout]:
        """Backend of `query_rollouts`: `query` is checked and ``where`` is its filter
        (`logic.check_rollout_query`)."""

    @final
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
        query = AttemptQuery(rollout_id, sort_by, sort_order, limit, offset)
        return await self._query_attempts(check_attempt_query(query))

    @abc.abstractmethod
    async def _query_attempts(self, query: AttemptQuery) -> PaginatedResult[Attempt]:
        """Backend of `query_attempts`: `query` is checked (`logic.check_attempt_query`)."""

    @final
    async def get_rollout_by_id(self, rollout_id: str) -> Rollout | AttemptedRollout | None:
        """The rollout with its latest attempt attached when it has one; None if unknown."""
        return await self._get_rollout(check_id("rollout_id", rollout_id))

    @abc.abstractmethod
    async def _get_rollout(self, rollout_id: str) -> Rollout | AttemptedRollout | None:
        """Backend of `get_rollout_by_id`: ``rollout_id`` is checked (`logic.check_id`)."""

    @final
    async def get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        """The attempt with the highest ``sequence_id``; None if the rollout is unknown or has no attempt."""
        return await self._get_latest_attempt(check_id("rollout_id", rollout_id))

    @abc.abstractmethod
    async def _get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        """Backend of `get_latest_attempt`: ``rollout_id`` is checked (`logic.check_id`)."""

    @final
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
        """Replace every field that is not `UNSET` (an explicit None clears it) and return the rollout.

        ``status`` is set directly, with no transition guard, and is the only way to change a finished
        rollout; it does not touch attempts. Writing a finished status stamps ``end_time``; a
        non-finished one clears it; ``queuing``/``requeuing`` puts the rollout back in the queue
        (once). Raises `RolloutNotFoundError` for an unknown id and `InvalidStatusError` or
        `InvalidRequestError` for a bad status or mode.
        """
        update = RolloutUpdate(rollout_id, input, mode, resources_id, status, config, metadata)
        return await self._apply_rollout_update(check_rollout_update(update))

    @abc.abstractmethod
    async def _apply_rollout_update(self, update: RolloutUpdate) -> Rollout:
        """Backend of `update_rollout`: `update` is checked (`logic.check_rollout_update`); a ``config``
        of None means the default `RolloutConfig`."""

    @final
    async def update_attempt(
        self,
        rollout_id: str,
        attempt_id: str | Literal["latest"],
        status: AttemptStatus | Unset = UNSET,
        worker_id: str | Unset = UNSET,
        last_heartbeat_time: float | Unset = UNSET,
        metadata: dict[str, Any] | Unset | None = UNSET,
    ) -> Attempt:
        """Replace every attempt field that is not `UNSET` and return the attempt.

        ``attempt_id="latest"`` targets the highest ``sequence_id``. There is no transition guard.
        ``status`` sets ``end_time`` per `logic.attempt_end_time_for` (fix 3) and, for the latest
        attempt only, the rollout status per `logic.next_rollout_status_after_attempt_update` -- a
        finished rollout is left alone (fix 2). A ``requeuing`` result re-queues the rollout. Worker
        bookkeeping as described on the class. Raises `RolloutNotFoundError`, `AttemptNotFoundError`
        (also for "latest" without attempts) or `InvalidStatusError`.
        """
        update = AttemptUpdate(rollout_id, attempt_id, status, worker_id, last_heartbeat_time, metadata)
        return await self._apply_attempt_update(check_attempt_update(update))

    @abc.abstractmethod
    async def _apply_attempt_update(self, update: AttemptUpdate) -> Attempt:
        """Backend of `update_attempt`: `update` is checked (`logic.check_attempt_update`)."""

    @abc.abstractmethod
    async def wait_for_rollouts(
        self, *, rollout_ids: list[str], timeout: float | None = None
    ) -> list[Rollout]:
        """Wait until the given rollouts finish; return those finished by the deadline, in input order.

        Unknown ids are omitted, never raised. ``timeout <= 0`` checks once; None waits indefinitely.
        The deadline is in real time, not the store clock. Must not block the event loop.
        """

    # ------------------------------------------------------------------ spans

    @final
    async def add_span(self, span: Span) -> Span | None:
        """Store one span; return it, or None if ``(rollout_id, attempt_id, span_id)`` already exists.

        The span counts as a heartbeat of its attempt (see `logic.heartbeat_transition`, fix 1). A span
        with ``sequence_id`` 0 gets the rollout's next sequence id from the store (the returned span
        carries it; see `logic.number_span`); otherwise the rollout's counter is raised to at least
        ``span.sequence_id`` so ids issued later are larger. Raises `RolloutNotFoundError`/
        `AttemptNotFoundError` for unknown ids and `InvalidSpanError` for a malformed span
        (`logic.validate_span`).
        """
        stored = await self._insert_spans(AddSpans([validate_span(span)]))
        return stored[0] if stored else None

    @final
    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        """Store several spans; return only those inserted (duplicates are skipped), in input order.

        Every span is checked first; the batch is stored in one atomic step. Spans with ``sequence_id``
        0 are numbered by the store, in input order, as in `add_span`.
        """
        stored: Sequence[Span] = await self._execute(AddSpans(spans))
        return stored

    @abc.abstractmethod
    async def _insert_spans(self, request: AddSpans) -> Sequence[Span]:
        """Backend of `add_span`, `add_many_spans` and `add_otel_span`: `request` holds at least one
        valid span (`logic.check_add_spans`); store the new ones atomically, numbering those with
        ``sequence_id`` 0 (`logic.number_span`), and return them in order."""

    @final
    async def add_otel_span(
        self,
        rollout_id: str,
        attempt_id: str,
        readable_span: ReadableSpan,
        sequence_id: int | None = None,
    ) -> Span | None:
        """Convert an OpenTelemetry SDK span with `Span.from_opentelemetry` and store it via `add_span()`.

        The store assigns the sequence id when none is given.
        """
        from agl_core.types import Span

        span = Span.from_opentelemetry(
            readable_span, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=sequence_id or 0
        )
        return await self.add_span(span)

    @final
    async def get_next_span_sequence_id(self, rollout_id: str, attempt_id: str) -> int:
        """Issue the next sequence id of the rollout: 1, 2, 3, ... with no gaps and no repeats.

        The counter is per rollout (the attempt id is ignored, quirk 5) and ids are not
        validated, so a tracer may allocate ids before its first span lands.
        """
        check_id("rollout_id", rollout_id)
        (issued,) = await self._issue_sequence_ids(SpanSequenceIds([(rollout_id, attempt_id)]))
        return issued

    @final
    async def get_many_span_sequence_ids(
        self, rollout_attempt_ids: Sequence[tuple[str, str]]
    ) -> Sequence[int]:
        """Issue one sequence id per ``(rollout_id, attempt_id)`` pair, atomically, in input order."""
        issued: Sequence[int] = await self._execute(SpanSequenceIds(rollout_attempt_ids))
        return issued

    @abc.abstractmethod
    async def _issue_sequence_ids(self, request: SpanSequenceIds) -> Sequence[int]:
        """Backend of `get_next_span_sequence_id` and `get_many_span_sequence_ids`: `request` holds at
        least one checked pair (`logic.check_sequence_ids`, `logic.plan_sequence_ids` plans the ids)."""

    @final
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
        """Spans of a rollout, by default of every attempt and ordered by ``sequence_id``.

        ``attempt_id="latest"`` resolves to the highest-sequence attempt (empty result when the
        rollout has none). ``rollout_id`` and the attempt are always ANDed; the optional field filters
        are combined with ``filter_logic`` ("or" with none of them matches every span of the rollout).
        An unknown rollout gives an empty result. A backend that evicts spans raises `RuntimeError` for
        an evicted rollout.
        """
        query = SpanQuery(
            rollout_id,
            attempt_id,
            trace_id,
            trace_id_contains,
            span_id,
            span_id_contains,
            parent_id,
            parent_id_contains,
            name,
            name_contains,
            filter_logic,
            limit,
            offset,
            sort_by,
            sort_order,
        )
        return await self._query_spans(query, check_span_query(query))

    @abc.abstractmethod
    async def _query_spans(self, query: SpanQuery, where: NormalizedFilter) -> PaginatedResult[Span]:
        """Backend of `query_spans`: `query` is checked and ``where`` holds the rollout and the field
        filters, not the attempt (`logic.check_span_query`; add a resolved attempt with
        `logic.with_attempt`)."""

    # ------------------------------------------------------------------ resources

    @final
    async def add_resources(self, resources: NamedResources) -> ResourcesUpdate:
        """Store a new snapshot under a fresh ``rs-`` id at version 1; it becomes the latest.

        Raises `InvalidRequestError` when ``resources`` is not a dict of name -> resource.
        """
        return await self._add_resources(resources)

    @abc.abstractmethod
    async def _add_resources(self, resources: NamedResources) -> ResourcesUpdate:
        """Backend of `add_resources`: validate ``resources`` as you encode them (`InvalidRequestError`)."""

    @final
    async def update_resources(self, resources_id: str, resources: NamedResources) -> ResourcesUpdate:
        """Upsert: version 1 for an unknown id, else version+1 with a new ``update_time`` and the same
        ``create_time``. The result becomes the latest (quirk 2, kept on purpose)."""
        return await self._update_resources(check_update_resources(UpdateResources(resources_id, resources)))

    @abc.abstractmethod
    async def _update_resources(self, request: UpdateResources) -> ResourcesUpdate:
        """Backend of `update_resources`: ``request.resources_id`` is checked
        (`logic.check_update_resources`); validate ``request.resources`` as in `_add_resources`."""

    @final
    async def get_resources_by_id(self, resources_id: str) -> ResourcesUpdate | None:
        """The snapshot with this id, or None."""
        return await self._get_resources(check_id("resources_id", resources_id))

    @abc.abstractmethod
    async def _get_resources(self, resources_id: str) -> ResourcesUpdate | None:
        """Backend of `get_resources_by_id`: ``resources_id`` is checked (`logic.check_id`)."""

    @final
    async def get_latest_resources(self) -> ResourcesUpdate | None:
        """The most recently added or updated snapshot, or None when there is none."""
        return await self._get_latest_resources()

    @abc.abstractmethod
    async def _get_latest_resources(self) -> ResourcesUpdate | None:
        """Backend of `get_latest_resources` (it takes no arguments, so there is nothing to check)."""

    @final
    async def query_resources(
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
        query = ResourcesQuery(resources_id, resources_id_contains, sort_by, sort_order, limit, offset)
        return await self._query_resources(query, check_resources_query(query))

    @abc.abstractmethod
    async def _query_resources(
        self, query: ResourcesQuery, where: NormalizedFilter
    ) -> PaginatedResult[ResourcesUpdate]:
        """Backend of `query_resources`: `query` is checked and ``where`` is its filter
        (`logic.check_resources_query`)."""

    # ------------------------------------------------------------------ workers

    @final
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
        query = WorkerQuery(status_in, worker_id_contains, filter_logic, sort_by, sort_order, limit, offset)
        return await self._query_workers(query, check_worker_query(query))

    @abc.abstractmethod
    async def _query_workers(self, query: WorkerQuery, where: NormalizedFilter) -> PaginatedResult[Worker]:
        """Backend of `query_workers`: `query` is checked and ``where`` is its filter
        (`logic.check_worker_query`)."""

    @final
    async def get_worker_by_id(self, worker_id: str) -> Worker | None:
        """The worker with this id, or None."""
        return await self._get_worker(check_id("worker_id", worker_id))

    @abc.abstractmethod
    async def _get_worker(self, worker_id: str) -> Worker | None:
        """Backend of `get_worker_by_id`: ``worker_id`` is checked (`logic.check_id`)."""

    @final
    async def update_worker(self, worker_id: str, heartbeat_stats: dict[str, Any] | Unset = UNSET) -> Worker:
        """Heartbeat only: upsert the worker (new ones start ``unknown``), stamp ``last_heartbeat_time``,
        and replace ``heartbeat_stats`` when given. Status comes from attempt writes, never from here."""
        return await self._update_worker(check_worker_heartbeat(WorkerHeartbeat(worker_id, heartbeat_stats)))

    @abc.abstractmethod
    async def _update_worker(self, request: WorkerHeartbeat) -> Worker:
        """Backend of `update_worker`: `request` is checked (`logic.check_worker_heartbeat`); stamp
        ``last_heartbeat_time`` with `logic.worker_updates_for_heartbeat` and upsert the worker."""


_REQUESTS: dict[type, tuple[Callable[[Any], Any], str]] = {
    RolloutQuery: (check_rollout_query, "_query_rollouts"),
    RolloutUpdate: (check_rollout_update, "_apply_rollout_update"),
    AttemptUpdate: (check_attempt_update, "_apply_attempt_update"),
    SpanQuery: (check_span_query, "_query_spans"),
    WorkerQuery: (check_worker_query, "_query_workers"),
    StartRollout: (check_start_rollout, "_start_rollout"),
    EnqueueRollouts: (check_enqueue_rollouts, "_enqueue_rollouts"),
    DequeueRollouts: (check_dequeue_rollouts, "_dequeue_rollouts"),
    StartAttempt: (check_start_attempt, "_start_attempt"),
    AttemptQuery: (check_attempt_query, "_query_attempts"),
    AddSpans: (check_add_spans, "_insert_spans"),
    SpanSequenceIds: (check_sequence_ids, "_issue_sequence_ids"),
    WorkerHeartbeat: (check_worker_heartbeat, "_update_worker"),
    UpdateResources: (check_update_resources, "_update_resources"),
    ResourcesQuery: (check_resources_query, "_query_resources"),
}
"""Request type -> its check and the backend method that runs it."""

BACKEND_METHODS: dict[str, str] = {
    "query_rollouts": "_query_rollouts",
    "update_rollout": "_apply_rollout_update",
    "update_attempt": "_apply_attempt_update",
    "query_spans": "_query_spans",
    "query_workers": "_query_workers",
    "start_rollout": "_start_rollout",
    "enqueue_rollout": "_enqueue_rollouts",
    "enqueue_many_rollouts": "_enqueue_rollouts",
    "dequeue_rollout": "_dequeue_rollouts",
    "dequeue_many_rollouts": "_dequeue_rollouts",
    "start_attempt": "_start_attempt",
    "query_attempts": "_query_attempts",
    "add_span": "_insert_spans",
    "add_many_spans": "_insert_spans",
    "add_otel_span": "_insert_spans",
    "get_next_span_sequence_id": "_issue_sequence_ids",
    "get_many_span_sequence_ids": "_issue_sequence_ids",
    "get_rollout_by_id": "_get_rollout",
    "get_latest_attempt": "_get_latest_attempt",
    "get_resources_by_id": "_get_resources",
    "get_worker_by_id": "_get_worker",
    "get_latest_resources": "_get_latest_resources",
    "add_resources": "_add_resources",
    "update_resources": "_update_resources",
    "query_resources": "_query_resources",
    "update_worker": "_update_worker",
}
"""Public method -> the backend method it calls after checking its arguments (the others are abstract)."""


def __getattr__(name: str) -> Any:
    """Agent Lightning 0.3's is_queuing/is_running/is_finished(rollout) (the table in agl_core._moved03)."""
    from agl_core._moved03 import moved_name

    return moved_name(__name__, name)
