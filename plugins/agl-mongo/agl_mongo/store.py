"""`MongoLightningStore`: the `LightningStore` contract on a plain (standalone) MongoDB server.

No replica set and no multi-document transaction is needed: every state change that must be atomic
touches one document (the rollout embeds its attempts), using ``find_one_and_update`` for queue
claims, ``$inc`` counters for sequence ids and order numbers, and ``rev``-guarded writes for status
changes decided by the shared rules of `agl_core.store.logic`. See `agl_mongo.rollouts` for the
document layout and `agl_mongo.connection` for clients and retries.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agl_core.store import (
    UNSET,
    InvalidRequestError,
    LightningStore,
    LightningStoreCapabilities,
    LightningStoreStatistics,
)
from agl_core.store import logic as store_logic
from agl_core.store.logic import (
    NormalizedFilter,
    check_rollout_ids,
    check_timeout,
)
from agl_core.store.logic.waiters import WaiterRegistry, poll_finished_rollouts
from agl_core.types import (
    Attempt,
    AttemptedRollout,
    EnqueueRolloutRequest,
    NamedResources,
    PaginatedResult,
    ResourcesUpdate,
    Rollout,
    Span,
    Worker,
)
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
from agl_mongo import attempts, queue, resources, rollouts, spans, workers
from agl_mongo.codec import (
    config_fields,
    dump_json,
    dump_resources,
    metadata_json,
)
from agl_mongo.connection import MongoConnection
from agl_mongo.context import StoreContext
from agl_mongo.uri import DEFAULT_DATABASE, DEFAULT_PARTITION, parse_mongo_uri, redact

__all__ = ["MongoLightningStore"]

DEFAULT_URI = "mongodb://localhost:27017/"
"""The server `MongoLightningStore` opens when no URI is given."""


def _legacy_alias(name: str, value: Any, default: Any, legacy_name: str, legacy_value: Any) -> Any:
    """``value``, or 0.3's ``legacy_value`` when only that was given; both given is an error."""
    if legacy_value is None:
        return value
    if value != default:
        raise InvalidRequestError(f"Give {name}= or its Agent Lightning 0.3 name {legacy_name}=, not both.")
    return legacy_value


class MongoLightningStore(LightningStore):
    """A `LightningStore` in a MongoDB database, shared by any number of processes and machines.

    Works on a standalone server (no replica set, no transactions). Every semantic rule is the
    contract's (`LightningStore`), computed by the same `agl_core.store.logic` helpers as the core
    stores. Differences in what can be observed:

    - A rollout that leaves ``queuing``/``requeuing`` by a path other than a dequeue (``start_attempt``,
      a span, ``update_rollout``) loses its queue place at once; entering the queue again appends it
      at the tail. The core stores keep such a stale entry until a dequeue passes it, so there a
      rollout re-queued before that keeps its old place.
    - After a connection loss, a call whose acknowledgement was lost is retried safely, except that
      sequence ids may skip a number (a gap, never a duplicate).
    - Calls are atomic per document, not across documents: a reader may briefly see a span stored
      before its heartbeat moved the attempt to ``running``, or an attempt ended before its worker
      turned idle.

    Args:
        uri: A ``mongodb://`` or ``mongodb+srv://`` URI (pymongo options allowed; see `from_uri` for
            the agl options ``database`` and ``partition_id``).
        database: The database; None takes it from the URI, else ``"agl"``.
        partition_id: Scopes every document, so several trainers can share one database; None means
            ``"default"`` (every store opened on the database sees the same data).
        clock: "Now" for every stored timestamp and the watchdog (see `LightningStore`).
        scan_debounce_seconds: Minimum seconds between two watchdog scans (0: before every call).
        client_kwargs: Extra keyword arguments for each `pymongo.AsyncMongoClient`.
        retry_timeout: Seconds to keep retrying a call while the server is unreachable before raising
            `agl_mongo.StoreUnavailableError`.
        mongo_uri: Agent Lightning 0.3's name for ``uri``.
        mongo_client_kwargs: 0.3's name for ``client_kwargs``.
        database_name: 0.3's name for ``database``.
        tracker: 0.3's metrics backend; not supported (an error): read `statistics` instead.
    """

    def __init__(
        self,
        uri: str = DEFAULT_URI,
        *,
        database: str | None = None,
        partition_id: str | None = None,
        clock: Callable[[], float] = time.time,
        scan_debounce_seconds: float = 10.0,
        client_kwargs: Mapping[str, Any] | None = None,
        retry_timeout: float = 30.0,
        mongo_uri: str | None = None,
        mongo_client_kwargs: Mapping[str, Any] | None = None,
        database_name: str | None = None,
        tracker: object = None,
    ) -> None:
        # Agent Lightning 0.3's keyword names (mongo_uri, mongo_client_kwargs, database_name) mean the same.
        uri = _legacy_alias("uri", uri, DEFAULT_URI, "mongo_uri", mongo_uri)
        client_kwargs = _legacy_alias(
            "client_kwargs", client_kwargs, None, "mongo_client_kwargs", mongo_client_kwargs
        )
        database = _legacy_alias("database", database, None, "database_name", database_name)
        if tracker is not None:
            raise InvalidRequestError(
                "MongoLightningStore(tracker=...) is not supported: read statistics() instead."
            )
        super().__init__(clock=clock, scan_debounce_seconds=scan_debounce_seconds)
        parsed = parse_mongo_uri(uri)
        database = database if database is not None else parsed.database or DEFAULT_DATABASE
        partition = partition_id if partition_id is not None else parsed.partition_id or DEFAULT_PARTITION
        for name, value in (("database", database), ("partition_id", partition)):
            if not isinstance(value, str) or not value:
                raise InvalidRequestError(f"{name} must be a non-empty string, got {value!r}.")
        if (
            isinstance(retry_timeout, bool)
            or not isinstance(retry_timeout, (int, float))
            or retry_timeout < 0
        ):
            raise InvalidRequestError(
                f"retry_timeout must be a number of seconds >= 0, got {retry_timeout!r}."
            )
        if client_kwargs is not None and not isinstance(client_kwargs, Mapping):
            raise InvalidRequestError(f"client_kwargs must be a dict, got {type(client_kwargs).__name__}.")
        options: dict[str, Any] = {
            "serverSelectionTimeoutMS": max(1, int(min(retry_timeout, 5.0) * 1000)),
            "connectTimeoutMS": 5000,
            "appname": "agl-mongo",
        }
        options.update(client_kwargs or {})
        self.uri: str = redact(uri)
        """The store URI with its password hidden."""
        self.database: str = database
        """The MongoDB database holding the store."""
        self.partition_id: str = partition
        """The partition every document of this store carries."""
        self.retry_timeout: float = float(retry_timeout)
        self._waiters = WaiterRegistry()
        conn = MongoConnection(parsed.client_uri, self.uri, database, options, self.retry_timeout)
        self._ctx = StoreContext(partition, clock, conn, self._waiters.wake_all)

    @classmethod
    def from_uri(cls, uri: str, **kwargs: Any) -> MongoLightningStore:
        """Open ``mongodb://[user:pass@]host[:port][/DATABASE][?database=DB&partition_id=P&options]``.

        The database is ``?database=``, else the URI path, else ``"agl"``; ``?partition_id=`` selects a
        partition. Both are removed before pymongo sees the URI; other options are pymongo's (e.g.
        ``directConnection=true``). Keyword arguments go to the constructor and win over the URI.
        """
        return cls(uri, **kwargs)

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}({self.uri!r}, database={self.database!r}, partition_id={self.partition_id!r})"

    async def close(self) -> None:
        """Close every client of this store; later calls raise `StoreClosedError`. Idempotent."""
        await self._ctx.conn.close()
        self._waiters.wake_all()

    @property
    def connection_retries(self) -> int:
        """How many database calls were retried after a connection failure (a health signal)."""
        return self._ctx.conn.retries

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        """Thread-safe (one client per event loop), async-safe and shared (``zero_copy``); no OTLP."""
        return LightningStoreCapabilities(
            thread_safe=True, async_safe=True, zero_copy=True, otlp_traces=False
        )

    async def _guard(self) -> None:
        """Run the watchdog scan when one is due (before the methods the contract guards)."""
        if self._watchdog_due():
            await attempts.scan(self._ctx)

    async def statistics(self) -> LightningStoreStatistics:
        """Counts of the partition and the uptime."""
        n_rollouts, n_attempts, n_spans, n_resources, n_workers = await rollouts.counts(self._ctx)
        return LightningStoreStatistics(
            name=type(self).__name__,
            total_rollouts=n_rollouts,
            total_attempts=n_attempts,
            total_spans=n_spans,
            total_resources=n_resources,
            total_workers=n_workers,
            uptime=self._uptime(),
        )

    # ------------------------------------------------------------------ rollouts and attempts

    @staticmethod
    def _new_rollout(r: EnqueueRolloutRequest) -> rollouts.NewRollout:
        """A checked rollout (`logic.check_new_rollout`) encoded for its document."""
        config_json, watched = config_fields(r.config)
        return rollouts.NewRollout(
            dump_json("input", r.input),
            r.mode,
            r.resources_id,
            config_json,
            watched,
            metadata_json("metadata", r.metadata),
        )

    async def _start_rollout(self, request: StartRollout) -> AttemptedRollout:
        """See `LightningStore.start_rollout`."""
        item = self._new_rollout(request.rollout)
        await self._guard()
        token = uuid.uuid4().hex
        (created,) = await rollouts.create_rollouts(self._ctx, [item], "preparing", request.worker_id, token)
        return created  # type: ignore[return-value]

    async def _enqueue_rollouts(self, request: EnqueueRollouts) -> Sequence[Rollout]:
        """Enqueue all rollouts with one insert, keeping their order in the result and the queue.

        The insert is unordered but every document carries its queue position, so a partial failure
        (connection loss past ``retry_timeout``) leaves the stored ones queued in order.
        """
        items = [self._new_rollout(r) for r in request.rollouts]
        await self._guard()
        return await rollouts.create_rollouts(self._ctx, items, "queuing", None, "")

    async def _dequeue_rollouts(self, request: DequeueRollouts) -> Sequence[AttemptedRollout]:
        """Claim up to `limit` rollouts in FIFO order, one atomic claim each."""
        await self._guard()
        return await queue.dequeue(self._ctx, request.limit, request.worker_id)

    async def _start_attempt(self, request: StartAttempt) -> AttemptedRollout:
        """See `LightningStore.start_attempt`."""
        await self._guard()
        return await queue.start_attempt(self._ctx, request.rollout_id, request.worker_id)

    async def _query_rollouts(
        self, query: RolloutQuery, where: NormalizedFilter
    ) -> PaginatedResult[Rollout | AttemptedRollout]:
        """See `LightningStore.query_rollouts`."""
        await self._guard()
        page = (query.sort_by, query.sort_order, query.limit, query.offset)
        return await rollouts.query_rollouts(self._ctx, where, *page)

    async def _query_attempts(self, query: AttemptQuery) -> PaginatedResult[Attempt]:
        """See `LightningStore.query_attempts`."""
        await self._guard()
        page = (query.sort_by, query.sort_order, query.limit, query.offset)
        return await rollouts.query_attempts(self._ctx, query.rollout_id, *page)

    async def _get_rollout(self, rollout_id: str) -> Rollout | AttemptedRollout | None:
        """See `LightningStore.get_rollout_by_id`."""
        await self._guard()
        return await rollouts.get_rollout(self._ctx, rollout_id)

    async def _get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        """See `LightningStore.get_latest_attempt`."""
        await self._guard()
        return await rollouts.get_latest_attempt(self._ctx, rollout_id)

    async def _apply_rollout_update(self, update: RolloutUpdate) -> Rollout:
        """See `LightningStore.update_rollout`."""
        changes = store_logic.encode_rollout_update(
            update,
            encode_input=_encode_input,
            encode_config=_config_changes,
            encode_metadata=_encode_metadata,
        )
        await self._guard()
        return await rollouts.update_rollout(self._ctx, update.rollout_id, changes)

    async def _apply_attempt_update(self, update: AttemptUpdate) -> Attempt:
        """See `LightningStore.update_attempt`."""
        metadata = update.metadata
        encoded = UNSET if metadata is UNSET else metadata_json("metadata", metadata)
        await self._guard()
        updated = await attempts.update_attempt(
            self._ctx,
            update.rollout_id,
            update.attempt_id,
            update.status,
            update.worker_id,
            update.last_heartbeat_time,
            encoded,
        )
        assert updated is not None  # only the watchdog's precondition can skip the write
        return updated

    async def wait_for_rollouts(
        self, *, rollout_ids: list[str], timeout: float | None = None
    ) -> list[Rollout]:
        """See `LightningStore.wait_for_rollouts`.

        Polls the database (other processes may finish rollouts) every 50 ms, backing off to 0.5 s, and
        wakes at once when a call of this store finishes a rollout.
        """
        ids = check_rollout_ids(rollout_ids)

        async def read(batch: Sequence[str]) -> dict[str, Rollout]:
            await self._guard()
            return await rollouts.rollouts_by_ids(self._ctx, batch)

        return await poll_finished_rollouts(self._waiters, ids, check_timeout(timeout), read)

    # ------------------------------------------------------------------ spans

    async def _insert_spans(self, request: AddSpans) -> Sequence[Span]:
        """Check every target attempt, then insert the checked batch in one call.

        Duplicates are skipped. Not atomic across documents: a connection loss past ``retry_timeout``
        in the middle can leave part of a batch stored (each stored span is complete).
        """
        return await spans.add_spans(self._ctx, list(request.spans))

    async def _issue_sequence_ids(self, request: SpanSequenceIds) -> Sequence[int]:
        """Issue one sequence id per pair, in input order, with one ``$inc`` per distinct rollout."""
        rollout_ids = [rollout_id for rollout_id, _ in request.pairs]
        wanted: dict[str, int] = {}
        for rollout_id in rollout_ids:
            wanted[rollout_id] = wanted.get(rollout_id, 0) + 1
        next_id: dict[str, int] = {}
        for rollout_id, count in wanted.items():
            next_id[rollout_id] = await spans.allocate_sequence_ids(self._ctx, rollout_id, count) - count + 1
        issued: list[int] = []
        for rollout_id in rollout_ids:
            issued.append(next_id[rollout_id])
            next_id[rollout_id] += 1
        return issued

    async def _query_spans(self, query: SpanQuery, where: NormalizedFilter) -> PaginatedResult[Span]:
        """See `LightningStore.query_spans`."""
        attempt_id = query.attempt_id
        normalized = store_logic.with_attempt(where, None if attempt_id == "latest" else attempt_id)
        page = (query.sort_by, query.sort_order, query.limit, query.offset)
        await self._guard()
        return await spans.query_spans(self._ctx, query.rollout_id, attempt_id, normalized, *page)

    # ------------------------------------------------------------------ resources

    async def _add_resources(self, resources_: NamedResources) -> ResourcesUpdate:
        """See `LightningStore.add_resources`."""
        return await resources.add_resources(self._ctx, dump_resources(resources_))

    async def _update_resources(self, request: UpdateResources) -> ResourcesUpdate:
        """See `LightningStore.update_resources`."""
        encoded = dump_resources(request.resources)
        await self._guard()
        return await resources.update_resources(self._ctx, request.resources_id, encoded)

    async def _get_resources(self, resources_id: str) -> ResourcesUpdate | None:
        """See `LightningStore.get_resources_by_id`."""
        return await resources.get_resources(self._ctx, resources_id)

    async def _get_latest_resources(self) -> ResourcesUpdate | None:
        """See `LightningStore.get_latest_resources`."""
        return await resources.get_latest_resources(self._ctx)

    async def _query_resources(
        self, query: ResourcesQuery, where: NormalizedFilter
    ) -> PaginatedResult[ResourcesUpdate]:
        """See `LightningStore.query_resources`."""
        page = (query.sort_by, query.sort_order, query.limit, query.offset)
        return await resources.query_resources(self._ctx, where, *page)

    # ------------------------------------------------------------------ workers

    async def _query_workers(self, query: WorkerQuery, where: NormalizedFilter) -> PaginatedResult[Worker]:
        """See `LightningStore.query_workers`."""
        await self._guard()
        page = (query.sort_by, query.sort_order, query.limit, query.offset)
        return await workers.query_workers(self._ctx, where, *page)

    async def _get_worker(self, worker_id: str) -> Worker | None:
        """See `LightningStore.get_worker_by_id`."""
        return await workers.get_worker(self._ctx, worker_id)

    async def _update_worker(self, request: WorkerHeartbeat) -> Worker:
        """See `LightningStore.update_worker`."""
        updates = store_logic.worker_updates_for_heartbeat(self.clock(), request.heartbeat_stats)
        if request.heartbeat_stats is not UNSET:
            dump_json("heartbeat_stats", request.heartbeat_stats)
        worker = await workers.upsert_worker(self._ctx, request.worker_id, updates, fetch=True)
        assert worker is not None
        return worker


def _encode_input(value: Any) -> str:
    return dump_json("input", value)


def _config_changes(config: Any) -> dict[str, Any]:
    config_json, watched = config_fields(config)
    return {"config": config_json, "wd": watched}


def _encode_metadata(value: Any) -> str | None:
    return metadata_json("metadata", value)
