"""`SqliteLightningStore`: the durable, embedded, multi-process `LightningStore` (``sqlite:///path.db``).

Design:

- **One writer thread per store** owns the store's only SQLite connection; every call (reads
  included) is a job on its queue, run in its own transaction, so the event loop never waits on disk
  or on another process's lock (`agl_core.store._sqlite_executor`). Results come back through
  ``loop.call_soon_threadsafe`` after the commit, so one store serves any number of event loops and
  threads. A single-statement write (``enqueue_rollout``, ``get_next_span_sequence_id``,
  ``update_worker``) runs in autocommit, where SQLite commits the statement before ``execute`` returns.
- **Durability**: WAL journal with ``synchronous=NORMAL``. A commit appends the transaction to the WAL
  file before it returns, so whatever a call acknowledged survives a killed process (SIGKILL, OOM);
  NORMAL only skips the fsync, which matters for a power cut or kernel crash (the file stays
  consistent, the last commits may be lost). ``FULL`` would add an fsync to every call for that case.
- **Several processes** may open the same file: every write transaction starts with ``BEGIN
  IMMEDIATE`` (waiting up to ``busy_timeout`` seconds for the lock), and every decision (queue claims,
  statuses, attempt and span sequence ids) is read and written inside that transaction. Nothing mutable
  is cached in memory between transactions.
- **Schema** versioned with ``PRAGMA user_version`` and upgraded by `_sqlite_schema.MIGRATIONS` at
  open (in one transaction); a file from a newer agl raises `SchemaVersionError`.
- **Semantics** come from `agl_core.store.logic`, as in `InMemoryLightningStore`; filters, sorting
  and pagination are translated to SQL with the same results (`agl_core.store._sqlite_query`).

Values are stored as JSON: a rollout's ``input`` and metadata must be JSON-serializable (pydantic
models are stored as their JSON form and read back as dicts; tuples and sets come back as lists).
Returned spans may be shared between calls (as in the in-memory store): treat them as read-only.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import unquote

from agl_core.store import _sqlite_reads as reads
from agl_core.store import _sqlite_resources as resources_ops
from agl_core.store import _sqlite_spans as spans_ops
from agl_core.store import logic
from agl_core.store._sqlite_codec import config_columns, dump_json, dump_resources, metadata_json
from agl_core.store._sqlite_executor import READ, READ_TX, WRITE, WRITE_ONE, SqliteExecutor
from agl_core.store._sqlite_ops import NewRollout, SqliteOps
from agl_core.store._sqlite_schema import SchemaVersionError, open_connection
from agl_core.store.base import (
    UNSET,
    LightningStore,
    LightningStoreCapabilities,
    LightningStoreStatistics,
)
from agl_core.store.errors import InvalidRequestError, StoreOpenError
from agl_core.store.logic import (
    check_rollout_ids,
    check_timeout,
)
from agl_core.store.logic.filters import NormalizedFilter
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

__all__ = ["SchemaVersionError", "SqliteLightningStore"]

_T = TypeVar("_T")


def _path_from_uri(uri: str) -> str:
    """The file path of ``sqlite:///relative.db`` / ``sqlite:////absolute.db`` / ``sqlite:///:memory:``."""
    if not isinstance(uri, str) or not uri.lower().startswith("sqlite:"):
        raise InvalidRequestError(f"Not a SQLite store URI: {uri!r}. Use 'sqlite:///path/to/store.db'.")
    rest = uri[len("sqlite:") :]
    if not rest.startswith("///"):
        raise InvalidRequestError(
            f"Invalid SQLite store URI {uri!r}: write three slashes before a relative path "
            "('sqlite:///store.db') and four before an absolute one ('sqlite:////var/agl/store.db')."
        )
    if "?" in rest or "#" in rest:
        raise InvalidRequestError(
            f"SQLite store URI {uri!r} has a query string; pass options as keyword arguments instead "
            "(open_store('sqlite:///store.db', busy_timeout=60))."
        )
    path = unquote(rest[3:])
    if not path:
        raise InvalidRequestError(f"SQLite store URI {uri!r} names no file. Use 'sqlite:///store.db'.")
    return path


def _after_commit(ops: SqliteOps, waiters: WaiterRegistry) -> Callable[[], None]:
    def hook() -> None:
        if ops.finished_changed:
            ops.finished_changed = False
            waiters.wake_all()

    return hook


class SqliteLightningStore(LightningStore):
    """A `LightningStore` in one SQLite file: durable, shareable by several processes, never blocking.

    See the module docstring for the design (store thread, group commit, WAL durability, multi-process
    transactions, schema migrations). Every semantic rule is the contract's (`LightningStore`). The
    constructor opens the file (and migrates it when needed) before it returns, so a bad path or a
    file from a newer agl fails at once; use ``async with`` or `close()` to stop the store's thread.

    Args:
        path: The database file; parent directories are created. ``":memory:"`` gives a private,
            non-durable database (useful in tests).
        clock: "Now" for every stored timestamp and the watchdog (see `LightningStore`).
        scan_debounce_seconds: Minimum seconds between two watchdog scans (0: before every call).
        busy_timeout: Seconds a write waits for another process holding the database lock before the
            call fails with `StoreError`.
        inline: Accepted and ignored (every call goes through the store's thread).
        read_only: Open an existing file without writing to it (inspection commands); a missing
            file raises `StoreOpenError` instead of creating an empty store.

    Raises:
        SchemaVersionError: The file has a newer schema than this agl knows, or is not an agl store.
        StoreOpenError: The file cannot be opened (unwritable directory, missing in read-only mode).
        StoreCorruptError: The file is damaged (an integrity quick check, bounded in time, runs at
            open); a damage found later makes every following call raise it.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        scan_debounce_seconds: float = 10.0,
        busy_timeout: float = 30.0,
        inline: bool = True,
        read_only: bool = False,
    ) -> None:
        super().__init__(clock=clock, scan_debounce_seconds=scan_debounce_seconds)
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidRequestError(f"path must be a file path, got {type(path).__name__} {path!r}.")
        path = os.fspath(path)
        if not isinstance(path, str) or not path:
            raise InvalidRequestError(f"path must be a non-empty file path, got {path!r}.")
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, (int, float)) or busy_timeout < 0:
            raise InvalidRequestError(f"busy_timeout must be a number of seconds >= 0, got {busy_timeout!r}.")
        if path != ":memory:":
            path = os.path.abspath(path)
            if not read_only:
                try:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                except OSError as exc:
                    raise StoreOpenError(
                        f"Cannot create the directory of the SQLite store {path}: {exc.strerror or exc}.",
                        hint="pick a path in a directory you can write to",
                    ) from exc
        self.path: str = path
        """Absolute path of the database file (or ``":memory:"``)."""
        self.busy_timeout: float = float(busy_timeout)
        ops = SqliteOps(clock)
        self._ops = ops
        self._waiters = WaiterRegistry()

        busy = self.busy_timeout

        def connect() -> Any:  # must not capture `self`: the thread would keep the store alive
            conn = open_connection(path, busy_timeout=busy, read_only=read_only)
            ops.db = conn.cursor()
            return conn

        self._executor = SqliteExecutor(
            connect,
            path=path,
            on_commit=_after_commit(ops, self._waiters),
        )
        self._finalizer = weakref.finalize(self, self._executor.request_stop)

    @classmethod
    def from_uri(cls, uri: str, **kwargs: Any) -> SqliteLightningStore:
        """Open ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` or ``sqlite:///:memory:``.

        Three slashes precede a relative path, four an absolute one (the SQLAlchemy convention).
        Keyword arguments go to the constructor.
        """
        return cls(_path_from_uri(uri), **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"

    @property
    def health_problem(self) -> str | None:
        """Why the store cannot be used (its file was found damaged), or None while it is healthy."""
        corrupt = self._executor.corrupt
        return None if corrupt is None else f"{corrupt} Recovery: {corrupt.hint}"

    async def close(self) -> None:
        """Commit and acknowledge every queued call, then close the database. Idempotent."""
        self._finalizer.detach()
        await self._executor.close()
        self._waiters.wake_all()

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        """Thread-safe, async-safe and shared across processes (``zero_copy``); no OTLP endpoint."""
        return LightningStoreCapabilities(
            thread_safe=True, async_safe=True, zero_copy=True, otlp_traces=False
        )

    def _call(
        self, fn: Callable[..., _T], args: tuple[Any, ...], mode: int, guarded: bool = False
    ) -> Awaitable[_T]:
        """Run ``fn(*args)`` through the executor (after a watchdog scan if `guarded` and one is due).

        Returns what to await at once (a plain function, not a coroutine: no extra frame per call).
        """
        if guarded and self._watchdog_due():
            return self._executor.submit(self._ops.guarded, (fn, args), WRITE)
        return self._executor.submit(fn, args, mode)

    async def statistics(self) -> LightningStoreStatistics:
        """Counts, uptime and ``database_bytes`` (pages in use times page size)."""
        rollouts, attempts, spans, resources, workers, size = await self._call(
            reads.counts, (self._ops,), READ
        )
        return LightningStoreStatistics(
            name=type(self).__name__,
            total_rollouts=rollouts,
            total_attempts=attempts,
            total_spans=spans,
            total_resources=resources,
            total_workers=workers,
            uptime=self._uptime(),
            database_bytes=size,
        )

    # ------------------------------------------------------------------ rollouts and attempts

    @staticmethod
    def _new_rollout(r: EnqueueRolloutRequest) -> NewRollout:
        """A checked rollout (`logic.check_new_rollout`) encoded as its columns."""
        return NewRollout(
            dump_json("input", r.input),
            r.mode,
            r.resources_id,
            *config_columns(r.config),
            metadata_json("metadata", r.metadata),
        )

    async def _start_rollout(self, request: StartRollout) -> AttemptedRollout:
        """See `LightningStore.start_rollout`."""
        item = self._new_rollout(request.rollout)
        return await self._call(self._ops.start_rollout, (item, request.worker_id), WRITE, guarded=True)

    async def _enqueue_rollouts(self, request: EnqueueRollouts) -> Sequence[Rollout]:
        """Enqueue all rollouts atomically (one transaction), keeping their order."""
        items = [self._new_rollout(r) for r in request.rollouts]
        mode = WRITE_ONE if len(items) == 1 else WRITE
        return await self._call(self._ops.enqueue, (items,), mode, guarded=True)

    async def _dequeue_rollouts(self, request: DequeueRollouts) -> Sequence[AttemptedRollout]:
        """Claim up to `limit` rollouts in one transaction (see `LightningStore.dequeue_many_rollouts`)."""
        return await self._call(self._ops.dequeue, (request.limit, request.worker_id), WRITE, guarded=True)

    async def _start_attempt(self, request: StartAttempt) -> AttemptedRollout:
        """See `LightningStore.start_attempt`."""
        args = (request.rollout_id, request.worker_id)
        return await self._call(self._ops.start_attempt, args, WRITE, guarded=True)

    async def _query_rollouts(
        self, query: RolloutQuery, where: NormalizedFilter
    ) -> PaginatedResult[Rollout | AttemptedRollout]:
        """See `LightningStore.query_rollouts`."""
        limit, offset = query.limit, query.offset
        args = (where, query.sort_by, query.sort_order, limit, offset)
        return await self._call(
            reads.query_rollouts, (self._ops, *args), _read_mode(limit, offset), guarded=True
        )

    async def _query_attempts(self, query: AttemptQuery) -> PaginatedResult[Attempt]:
        """See `LightningStore.query_attempts`."""
        args = (query.rollout_id, query.sort_by, query.sort_order, query.limit, query.offset)
        return await self._call(
            reads.query_attempts, (self._ops, *args), _read_mode(query.limit, query.offset), guarded=True
        )

    async def _get_rollout(self, rollout_id: str) -> Rollout | AttemptedRollout | None:
        """See `LightningStore.get_rollout_by_id`."""
        return await self._call(
            reads.get_rollout,
            (
                self._ops,
                rollout_id,
            ),
            READ,
            guarded=True,
        )

    async def _get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        """See `LightningStore.get_latest_attempt`."""
        return await self._call(
            reads.get_latest_attempt,
            (
                self._ops,
                rollout_id,
            ),
            READ,
            guarded=True,
        )

    async def _apply_rollout_update(self, update: RolloutUpdate) -> Rollout:
        """See `LightningStore.update_rollout`."""
        changes = logic.encode_rollout_update(
            update,
            encode_input=_encode_input,
            encode_config=_config_changes,
            encode_metadata=_encode_metadata,
        )
        args = (update.rollout_id, changes)
        return await self._call(self._ops.update_rollout, args, WRITE, guarded=True)

    async def _apply_attempt_update(self, update: AttemptUpdate) -> Attempt:
        """See `LightningStore.update_attempt`."""
        metadata = update.metadata
        encoded = UNSET if metadata is UNSET else metadata_json("metadata", metadata)
        args = (
            update.rollout_id,
            update.attempt_id,
            update.status,
            update.worker_id,
            update.last_heartbeat_time,
            encoded,
        )
        return await self._call(self._ops.update_attempt, args, WRITE, guarded=True)

    async def wait_for_rollouts(
        self, *, rollout_ids: list[str], timeout: float | None = None
    ) -> list[Rollout]:
        """See `LightningStore.wait_for_rollouts`.

        Polls the database (other processes may finish rollouts) every 50 ms, backing off to 0.5 s, and
        wakes at once when a call of this store finishes a rollout.
        """
        ids = check_rollout_ids(rollout_ids)

        async def read(batch: Sequence[str]) -> dict[str, Rollout]:
            return await self._call(reads.rollouts_by_ids, (self._ops, batch), READ, guarded=True)

        async def check_open() -> None:
            if self._executor.closed:
                await self._call(reads.counts, (self._ops,), READ)  # raises StoreClosedError

        return await poll_finished_rollouts(
            self._waiters, ids, check_timeout(timeout), read, before_pause=check_open
        )

    # ------------------------------------------------------------------ spans

    async def _insert_spans(self, request: AddSpans) -> Sequence[Span]:
        """Insert the checked batch in one transaction (duplicates skipped)."""
        return await self._call(spans_ops.add_spans, (self._ops, request.spans, _span_json), WRITE)

    async def _issue_sequence_ids(self, request: SpanSequenceIds) -> Sequence[int]:
        """Issue one sequence id per pair in one transaction (see `LightningStore`)."""
        rollout_ids = [rollout_id for rollout_id, _ in request.pairs]
        return await self._call(spans_ops.sequence_ids, (self._ops, rollout_ids), WRITE)

    async def _query_spans(self, query: SpanQuery, where: NormalizedFilter) -> PaginatedResult[Span]:
        """See `LightningStore.query_spans`."""
        rollout_id, attempt_id = query.rollout_id, query.attempt_id
        limit, offset = query.limit, query.offset
        normalized = logic.with_attempt(where, None if attempt_id == "latest" else attempt_id)
        args = (
            self._ops,
            rollout_id,
            attempt_id,
            normalized,
            query.sort_by,
            query.sort_order,
            limit,
            offset,
        )
        mode = READ_TX if attempt_id == "latest" else _read_mode(limit, offset)
        return await self._call(spans_ops.query_spans, args, mode, guarded=True)

    # ------------------------------------------------------------------ resources

    async def _add_resources(self, resources: NamedResources) -> ResourcesUpdate:
        """See `LightningStore.add_resources`."""
        encoded = dump_resources(resources)
        return await self._call(resources_ops.add_resources, (self._ops, encoded), WRITE)

    async def _update_resources(self, request: UpdateResources) -> ResourcesUpdate:
        """See `LightningStore.update_resources`."""
        args = (self._ops, request.resources_id, dump_resources(request.resources))
        return await self._call(resources_ops.update_resources, args, WRITE, guarded=True)

    async def _get_resources(self, resources_id: str) -> ResourcesUpdate | None:
        """See `LightningStore.get_resources_by_id`."""
        return await self._call(resources_ops.get_resources, (self._ops, resources_id), READ)

    async def _get_latest_resources(self) -> ResourcesUpdate | None:
        """See `LightningStore.get_latest_resources`."""
        return await self._call(resources_ops.get_latest_resources, (self._ops,), READ)

    async def _query_resources(
        self, query: ResourcesQuery, where: NormalizedFilter
    ) -> PaginatedResult[ResourcesUpdate]:
        """See `LightningStore.query_resources`."""
        limit, offset = query.limit, query.offset
        args = (self._ops, where, query.sort_by, query.sort_order, limit, offset)
        return await self._call(resources_ops.query_resources, args, _read_mode(limit, offset))

    # ------------------------------------------------------------------ workers

    async def _query_workers(self, query: WorkerQuery, where: NormalizedFilter) -> PaginatedResult[Worker]:
        """See `LightningStore.query_workers`."""
        limit, offset = query.limit, query.offset
        args = (where, query.sort_by, query.sort_order, limit, offset)
        return await self._call(
            reads.query_workers, (self._ops, *args), _read_mode(limit, offset), guarded=True
        )

    async def _get_worker(self, worker_id: str) -> Worker | None:
        """See `LightningStore.get_worker_by_id`."""
        return await self._call(
            reads.get_worker,
            (
                self._ops,
                worker_id,
            ),
            READ,
        )

    async def _update_worker(self, request: WorkerHeartbeat) -> Worker:
        """See `LightningStore.update_worker`."""
        if request.heartbeat_stats is not UNSET:
            dump_json("heartbeat_stats", request.heartbeat_stats)
        return await self._call(self._heartbeat, (request.worker_id, request.heartbeat_stats), WRITE_ONE)

    def _heartbeat(self, worker_id: str, heartbeat_stats: Any) -> Worker:
        updates = logic.worker_updates_for_heartbeat(self.clock(), heartbeat_stats)
        return self._ops.update_worker(worker_id, updates)


_SPAN_SERIALIZER = Span.__pydantic_serializer__


def _span_json(span: Span) -> str:
    """``span.model_dump_json()`` without its keyword handling (this runs for every span added)."""
    return _SPAN_SERIALIZER.to_json(span).decode()


def _encode_input(value: Any) -> str:
    return dump_json("input", value)


def _config_changes(config: Any) -> dict[str, Any]:
    config_json, timeout, unresponsive = config_columns(config)
    return {"config": config_json, "timeout_seconds": timeout, "unresponsive_seconds": unresponsive}


def _encode_metadata(value: Any) -> str | None:
    return metadata_json("metadata", value)


def _read_mode(limit: int, offset: int) -> int:
    """A query is one SELECT unless it may need a COUNT too (then both must see one snapshot)."""
    return READ if limit == -1 and offset == 0 else READ_TX
