"""`PostgresLightningStore`: the `LightningStore` contract on PostgreSQL (``postgresql://`` URIs).

Any number of processes on any number of machines share one store through the database. Every state
change is atomic in PostgreSQL (one statement, or one transaction for span batches), so a dropped
connection or a killed client never leaves half a change, and nothing is acknowledged before it is
committed. See `agl_postgres.ops` for how claims, updates and the watchdog stay correct under
concurrency, `agl_postgres.connection` for pools and retries and `agl_postgres.schema` for the layout.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

from agl_core.store import (
    UNSET,
    LightningStore,
    LightningStoreCapabilities,
    LightningStoreStatistics,
    logic,
)
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
from agl_core.types.status import FINISHED_ROLLOUT_STATUSES
from agl_postgres import ops, reads, resources, spans
from agl_postgres.codec import config_columns, dump_json, dump_resources, metadata_json
from agl_postgres.connection import Call, PostgresConnection
from agl_postgres.uri import parse_postgres_uri

__all__ = ["PostgresLightningStore"]

_POLL_START = 0.05
_POLL_MAX = 1.0


class PostgresLightningStore(LightningStore):
    """A `LightningStore` in a PostgreSQL schema, shared by any number of processes and machines.

    Args:
        uri: ``postgresql://user:password@host:port/database`` (or ``postgres://``); the query may carry
            the store options below and any libpq-style option the driver understands (``sslmode``...).
        clock: "Now" for every stored timestamp and the watchdog (see `LightningStore`).
        scan_debounce_seconds: Minimum seconds between two watchdog scans of this store (0: before
            every guarded call).
        schema: PostgreSQL schema holding the store (default ``agl``): one per deployment.
        pool_min_size / pool_max_size: Connections kept per event loop (default 1 / 10).
        connect_timeout: Seconds to open one connection (default 10).
        command_timeout: Seconds one statement may run (default 60).
        acquire_timeout: Seconds a call waits for a free pooled connection (default 60).
        retry_timeout: Seconds a call keeps retrying while the server is unreachable before raising
            `agl_postgres.StoreUnavailableError` (default 30).

    Keyword arguments win over the URI query. Nothing connects until the first call, which applies any
    pending schema migration.
    """

    def __init__(
        self,
        uri: str,
        *,
        clock: Callable[[], float] = time.time,
        scan_debounce_seconds: float = 10.0,
        schema: str | None = None,
        pool_min_size: int | None = None,
        pool_max_size: int | None = None,
        connect_timeout: float | None = None,
        command_timeout: float | None = None,
        acquire_timeout: float | None = None,
        retry_timeout: float | None = None,
    ) -> None:
        super().__init__(clock=clock, scan_debounce_seconds=scan_debounce_seconds)
        settings = parse_postgres_uri(
            uri,
            {
                "schema": schema,
                "pool_min_size": pool_min_size,
                "pool_max_size": pool_max_size,
                "connect_timeout": connect_timeout,
                "command_timeout": command_timeout,
                "acquire_timeout": acquire_timeout,
                "retry_timeout": retry_timeout,
            },
        )
        self.uri: str = settings.display_uri
        """The store URI with its password hidden."""
        self.schema: str = settings.options["schema"]
        """The PostgreSQL schema holding the store."""
        self.options: dict[str, Any] = dict(settings.options)
        """The effective store options (pool sizes, timeouts, schema)."""
        self._db = PostgresConnection(settings)

    @classmethod
    def from_uri(cls, uri: str, **kwargs: Any) -> PostgresLightningStore:
        """Open ``postgresql://...`` or ``postgres://...``; keyword arguments go to the constructor."""
        return cls(uri, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uri!r}, schema={self.schema!r})"

    @property
    def connection_retries(self) -> int:
        """Calls retried after a lost connection, a deadlock or a serialization failure."""
        return self._db.retries

    async def close(self) -> None:
        """Close every connection pool of this store. Idempotent."""
        if not self._db.closed:
            await self._db.close()

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        """Thread-safe, async-safe and shared by every process and machine (``zero_copy``)."""
        return LightningStoreCapabilities(
            thread_safe=True, async_safe=True, zero_copy=True, otlp_traces=False
        )

    async def _run(self, call: Call[Any], guarded: bool = False) -> Any:
        if guarded and self._watchdog_due():
            await self._db.run(lambda conn, retrying: ops.scan(conn, self.clock()))
        return await self._db.run(call)

    async def statistics(self) -> LightningStoreStatistics:
        """Counts, uptime and ``database_bytes`` (the size of the schema's tables with their indexes)."""
        r, a, s, res, w, size = await self._run(lambda conn, retrying: reads.counts(conn))
        return LightningStoreStatistics(
            name=type(self).__name__,
            total_rollouts=r,
            total_attempts=a,
            total_spans=s,
            total_resources=res,
            total_workers=w,
            uptime=self._uptime(),
            database_bytes=size,
        )

    # ------------------------------------------------------------------ rollouts and attempts

    @staticmethod
    def _new_rollout(r: EnqueueRolloutRequest) -> ops.NewRollout:
        """A checked rollout (`logic.check_new_rollout`) encoded as its columns."""
        return ops.NewRollout(
            dump_json("input", r.input),
            r.mode,
            r.resources_id,
            *config_columns(r.config),
            metadata_json("metadata", r.metadata),
        )

    async def _start_rollout(self, request: StartRollout) -> AttemptedRollout:
        """See `LightningStore.start_rollout`."""
        item, worker = self._new_rollout(request.rollout), request.worker_id
        ids = [logic.new_rollout_id(), logic.new_attempt_id()]
        now = self.clock()
        return await self._run(
            lambda conn, retrying: ops.start_rollout(conn, item, ids, worker, now, retrying), True
        )

    async def _enqueue_rollouts(self, request: EnqueueRollouts) -> Sequence[Rollout]:
        """Enqueue all rollouts in one statement (atomic), keeping their order."""
        items = [self._new_rollout(r) for r in request.rollouts]
        ids = [logic.new_rollout_id() for _ in items]
        now = self.clock()
        return await self._run(lambda conn, retrying: ops.enqueue(conn, items, ids, now, retrying), True)

    async def _dequeue_rollouts(self, request: DequeueRollouts) -> Sequence[AttemptedRollout]:
        """Claim up to `limit` rollouts in one statement (see `LightningStore.dequeue_many_rollouts`)."""
        limit, worker = request.limit, request.worker_id
        token = ops.new_token()
        now = self.clock()
        return await self._run(
            lambda conn, retrying: ops.dequeue(conn, limit, worker, token, now, retrying), True
        )

    async def _start_attempt(self, request: StartAttempt) -> AttemptedRollout:
        """See `LightningStore.start_attempt`."""
        rollout_id, worker = request.rollout_id, request.worker_id
        ids = [logic.new_attempt_id()]
        return await self._run(
            lambda conn, retrying: ops.start_attempt(conn, rollout_id, worker, ids, self.clock(), retrying),
            True,
        )

    async def _query_rollouts(
        self, query: RolloutQuery, where: logic.NormalizedFilter
    ) -> PaginatedResult[Rollout | AttemptedRollout]:
        """See `LightningStore.query_rollouts`."""
        page = (query.sort_by, query.sort_order, query.limit, query.offset)
        return await self._run(lambda conn, retrying: reads.query_rollouts(conn, where, *page), True)

    async def _query_attempts(self, query: AttemptQuery) -> PaginatedResult[Attempt]:
        """See `LightningStore.query_attempts`."""
        rollout_id, page = query.rollout_id, (query.sort_by, query.sort_order, query.limit, query.offset)
        return await self._run(lambda conn, retrying: reads.query_attempts(conn, rollout_id, *page), True)

    async def _get_rollout(self, rollout_id: str) -> Rollout | AttemptedRollout | None:
        """See `LightningStore.get_rollout_by_id`."""
        return await self._run(lambda conn, retrying: reads.get_rollout(conn, rollout_id), True)

    async def _get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        """See `LightningStore.get_latest_attempt`."""
        return await self._run(lambda conn, retrying: reads.get_latest_attempt(conn, rollout_id), True)

    async def _apply_rollout_update(self, update: RolloutUpdate) -> Rollout:
        """See `LightningStore.update_rollout`."""
        changes = logic.encode_rollout_update(
            update,
            encode_input=lambda value: dump_json("input", value),
            encode_config=_config_changes,
            encode_metadata=lambda value: metadata_json("metadata", value),
        )
        return await self._run(
            lambda conn, retrying: ops.update_rollout(conn, update.rollout_id, dict(changes), self.clock()),
            True,
        )

    async def _apply_attempt_update(self, update: AttemptUpdate) -> Attempt:
        """See `LightningStore.update_attempt`."""
        encoded = UNSET if update.metadata is UNSET else metadata_json("metadata", update.metadata)
        return await self._run(
            lambda conn, retrying: ops.update_attempt(
                conn,
                update.rollout_id,
                update.attempt_id,
                update.status,
                update.worker_id,
                update.last_heartbeat_time,
                encoded,
                self.clock(),
            ),
            True,
        )

    async def wait_for_rollouts(
        self, *, rollout_ids: list[str], timeout: float | None = None
    ) -> list[Rollout]:
        """See `LightningStore.wait_for_rollouts`.

        Woken by ``LISTEN agl_finished`` (sent by a trigger when any client finishes a rollout), with a
        fallback poll every 50 ms backing off to 1 s in case a notification is missed.
        """
        ids = logic.check_rollout_ids(rollout_ids)
        wait = logic.check_timeout(timeout)
        loop = asyncio.get_running_loop()
        deadline = None if wait is None else loop.time() + wait
        interval = _POLL_START
        while True:
            wake = await self._db.register_waiter()  # before reading, so no finish is missed
            try:
                found = await self._run(lambda conn, retrying: reads.rollouts_by_ids(conn, ids), True)
                finished = {rid: r for rid, r in found.items() if r.status in FINISHED_ROLLOUT_STATUSES}
                remaining = None if deadline is None else deadline - loop.time()
                if len(finished) == len(found) or (remaining is not None and remaining <= 0):
                    return [finished[rid] for rid in ids if rid in finished]
                pause = interval if remaining is None else min(interval, remaining)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(wake), pause)
            finally:
                self._db.discard_waiter(wake)
            interval = min(interval * 2, _POLL_MAX)

    # ------------------------------------------------------------------ spans

    async def _insert_spans(self, request: AddSpans) -> Sequence[Span]:
        """Insert the checked batch in one transaction (duplicates skipped)."""
        checked = list(request.spans)
        return await self._run(
            lambda conn, retrying: spans.add_spans(conn, checked, _span_json, self.clock(), retrying)
        )

    async def _issue_sequence_ids(self, request: SpanSequenceIds) -> Sequence[int]:
        """Issue one sequence id per pair in one statement (see `LightningStore`)."""
        rollout_ids = [rollout_id for rollout_id, _ in request.pairs]
        if len(rollout_ids) == 1:
            rollout_id = rollout_ids[0]
            return [await self._run(lambda conn, retrying: spans.next_sequence_id(conn, rollout_id))]
        return await self._run(lambda conn, retrying: spans.sequence_ids(conn, rollout_ids))

    async def _query_spans(self, query: SpanQuery, where: logic.NormalizedFilter) -> PaginatedResult[Span]:
        """See `LightningStore.query_spans`."""
        rollout_id, attempt_id = query.rollout_id, query.attempt_id
        normalized = logic.with_attempt(where, None if attempt_id == "latest" else attempt_id)
        page = (query.sort_by, query.sort_order, query.limit, query.offset)
        return await self._run(
            lambda conn, retrying: spans.query_spans(conn, rollout_id, attempt_id, normalized, *page),
            True,
        )

    # ------------------------------------------------------------------ resources

    async def _add_resources(self, resources_: NamedResources) -> ResourcesUpdate:
        """See `LightningStore.add_resources`."""
        encoded = dump_resources(resources_)
        resources_id = logic.new_resources_id()
        return await self._run(
            lambda conn, retrying: resources.add_resources(
                conn, resources_id, encoded, self.clock(), retrying
            )
        )

    async def _update_resources(self, request: UpdateResources) -> ResourcesUpdate:
        """See `LightningStore.update_resources`."""
        resources_id, encoded = request.resources_id, dump_resources(request.resources)
        return await self._run(
            lambda conn, retrying: resources.update_resources(conn, resources_id, encoded, self.clock()), True
        )

    async def _get_resources(self, resources_id: str) -> ResourcesUpdate | None:
        """See `LightningStore.get_resources_by_id`."""
        return await self._run(lambda conn, retrying: resources.get_resources(conn, resources_id))

    async def _get_latest_resources(self) -> ResourcesUpdate | None:
        """See `LightningStore.get_latest_resources`."""
        return await self._run(lambda conn, retrying: resources.get_latest_resources(conn))

    async def _query_resources(
        self, query: ResourcesQuery, where: logic.NormalizedFilter
    ) -> PaginatedResult[ResourcesUpdate]:
        """See `LightningStore.query_resources`."""
        page = (query.sort_by, query.sort_order, query.limit, query.offset)
        return await self._run(lambda conn, retrying: resources.query_resources(conn, where, *page))

    # ------------------------------------------------------------------ workers

    async def _query_workers(
        self, query: WorkerQuery, where: logic.NormalizedFilter
    ) -> PaginatedResult[Worker]:
        """See `LightningStore.query_workers`."""
        page = (query.sort_by, query.sort_order, query.limit, query.offset)
        return await self._run(lambda conn, retrying: reads.query_workers(conn, where, *page), True)

    async def _get_worker(self, worker_id: str) -> Worker | None:
        """See `LightningStore.get_worker_by_id`."""
        return await self._run(lambda conn, retrying: reads.get_worker(conn, worker_id))

    async def _update_worker(self, request: WorkerHeartbeat) -> Worker:
        """See `LightningStore.update_worker`."""
        worker_id = request.worker_id
        stats = (
            UNSET
            if request.heartbeat_stats is UNSET
            else dump_json("heartbeat_stats", request.heartbeat_stats)
        )

        async def call(conn: Any, retrying: bool) -> Worker:
            updates = logic.worker_updates_for_heartbeat(self.clock(), UNSET)
            if stats is not UNSET:
                updates["heartbeat_stats"] = stats
            return await ops.update_worker(conn, worker_id, updates)

        return await self._run(call)


_SPAN_SERIALIZER = Span.__pydantic_serializer__


def _span_json(span: Span) -> str:
    return _SPAN_SERIALIZER.to_json(span).decode()


def _config_changes(config: Any) -> dict[str, Any]:
    config_json, timeout, unresponsive = config_columns(config)
    return {"config": config_json, "timeout_seconds": timeout, "unresponsive_seconds": unresponsive}


def _check_page(sort_by: str | None, sort_order: str, limit: int, offset: int, model_type: type) -> None:
    logic.validate_sort_order(sort_order)
    if sort_by is not None:
        logic.sort_key_for(sort_by, model_type)
    logic.validate_pagination(limit, offset)
