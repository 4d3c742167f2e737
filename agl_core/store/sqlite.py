"""`SqliteLightningStore`: the durable, embedded, multi-process `LightningStore` (``sqlite:///path.db``).

The design is described in docs/stores.md (SQLite): one writer thread per store owns the connection and
runs every call as a job in its own transaction (``BEGIN IMMEDIATE`` for writes, so several processes
may share a file), answered through ``loop.call_soon_threadsafe`` after the commit; WAL with
``synchronous=NORMAL``; the schema versioned and migrated at open (`agl_core.store._sqlite_schema`).
The transaction bodies are in `agl_core.store._sqlite_ops`; their semantics come from
`agl_core.store.logic`, as in `InMemoryLightningStore` (filters, sorting and pagination translated to
SQL by `agl_core.store._sqlite_query`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import sqlite3
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import unquote

from agl_core.store import _sqlite_ops as ops_
from agl_core.store import logic
from agl_core.store._sqlite_codec import config_columns, dump_json, dump_resources, metadata_json
from agl_core.store._sqlite_ops import DeferredError, NewRollout, SqliteOps
from agl_core.store._sqlite_schema import SchemaVersionError, corrupt_error, is_corruption, open_connection
from agl_core.store.base import (
    UNSET,
    LightningStore,
    LightningStoreCapabilities,
    LightningStoreStatistics,
)
from agl_core.store.errors import (
    InvalidRequestError,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreOpenError,
)
from agl_core.store.logic import check_rollout_ids, check_timeout
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
from agl_core.types import queries as q

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

    See the module docstring for the design (store thread, WAL durability, multi-process
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

        self._executor = _Executor(
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
        self, fn: Callable[..., _T], *args: Any, write: bool = False, guarded: bool = False
    ) -> Awaitable[_T]:
        """Run ``fn(*args)`` on the store's thread (after a watchdog scan if `guarded` and one is due)."""
        if guarded and self._watchdog_due():
            return self._executor.submit(self._ops.guarded, (fn, args), True)
        return self._executor.submit(fn, args, write)

    async def statistics(self) -> LightningStoreStatistics:
        """Counts, uptime and ``database_bytes`` (pages in use times page size)."""
        rollouts, attempts, spans, resources, workers, size = await self._call(ops_.counts, self._ops)
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

    async def _start_rollout(self, request: q.StartRollout) -> AttemptedRollout:
        item = self._new_rollout(request.rollout)
        return await self._call(self._ops.start_rollout, item, request.worker_id, write=True, guarded=True)

    async def _enqueue_rollouts(self, request: q.EnqueueRollouts) -> Sequence[Rollout]:
        items = [self._new_rollout(r) for r in request.rollouts]
        return await self._call(self._ops.enqueue, items, write=True, guarded=True)

    async def _dequeue_rollouts(self, request: q.DequeueRollouts) -> Sequence[AttemptedRollout]:
        return await self._call(self._ops.dequeue, request.limit, request.worker_id, write=True, guarded=True)

    async def _start_attempt(self, request: q.StartAttempt) -> AttemptedRollout:
        args = (request.rollout_id, request.worker_id)
        return await self._call(self._ops.start_attempt, *args, write=True, guarded=True)

    async def _query_rollouts(
        self, query: q.RolloutQuery, where: NormalizedFilter
    ) -> PaginatedResult[Rollout | AttemptedRollout]:
        args = (where, query.sort_by, query.sort_order, query.limit, query.offset)
        return await self._call(ops_.query_rollouts, self._ops, *args, guarded=True)

    async def _query_attempts(self, query: q.AttemptQuery) -> PaginatedResult[Attempt]:
        args = (query.rollout_id, query.sort_by, query.sort_order, query.limit, query.offset)
        return await self._call(ops_.query_attempts, self._ops, *args, guarded=True)

    async def _get_rollout(self, rollout_id: str) -> Rollout | AttemptedRollout | None:
        return await self._call(ops_.get_rollout, self._ops, rollout_id, guarded=True)

    async def _get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        return await self._call(ops_.get_latest_attempt, self._ops, rollout_id, guarded=True)

    async def _apply_rollout_update(self, update: q.RolloutUpdate) -> Rollout:
        changes = logic.encode_rollout_update(
            update,
            encode_input=_encode_input,
            encode_config=_config_changes,
            encode_metadata=_encode_metadata,
        )
        return await self._call(
            self._ops.update_rollout, update.rollout_id, changes, write=True, guarded=True
        )

    async def _apply_attempt_update(self, update: q.AttemptUpdate) -> Attempt:
        metadata = update.metadata
        encoded = UNSET if metadata is UNSET else metadata_json("metadata", metadata)
        args = (update.rollout_id, update.attempt_id, update.status, update.worker_id)
        return await self._call(
            self._ops.update_attempt, *args, update.last_heartbeat_time, encoded, write=True, guarded=True
        )

    async def wait_for_rollouts(
        self, *, rollout_ids: list[str], timeout: float | None = None
    ) -> list[Rollout]:
        """See `LightningStore.wait_for_rollouts`.

        Polls the database (other processes may finish rollouts) every 50 ms, backing off to 0.5 s, and
        wakes at once when a call of this store finishes a rollout.
        """
        ids = check_rollout_ids(rollout_ids)

        async def read(batch: Sequence[str]) -> dict[str, Rollout]:
            return await self._call(ops_.rollouts_by_ids, self._ops, batch, guarded=True)

        async def check_open() -> None:
            if self._executor.closed:
                await self._call(ops_.counts, self._ops)  # raises StoreClosedError

        return await poll_finished_rollouts(
            self._waiters, ids, check_timeout(timeout), read, before_pause=check_open
        )

    # ------------------------------------------------------------------ spans

    async def _insert_spans(self, request: q.AddSpans) -> Sequence[Span]:
        return await self._call(ops_.add_spans, self._ops, request.spans, _span_json, write=True)

    async def _issue_sequence_ids(self, request: q.SpanSequenceIds) -> Sequence[int]:
        rollout_ids = [rollout_id for rollout_id, _ in request.pairs]
        return await self._call(ops_.sequence_ids, self._ops, rollout_ids, write=True)

    async def _query_spans(self, query: q.SpanQuery, where: NormalizedFilter) -> PaginatedResult[Span]:
        attempt_id = query.attempt_id
        normalized = logic.with_attempt(where, None if attempt_id == "latest" else attempt_id)
        args = (query.rollout_id, attempt_id, normalized, query.sort_by, query.sort_order)
        return await self._call(ops_.query_spans, self._ops, *args, query.limit, query.offset, guarded=True)

    # ------------------------------------------------------------------ resources

    async def _add_resources(self, resources: NamedResources) -> ResourcesUpdate:
        return await self._call(ops_.add_resources, self._ops, dump_resources(resources), write=True)

    async def _update_resources(self, request: q.UpdateResources) -> ResourcesUpdate:
        args = (self._ops, request.resources_id, dump_resources(request.resources))
        return await self._call(ops_.update_resources, *args, write=True, guarded=True)

    async def _get_resources(self, resources_id: str) -> ResourcesUpdate | None:
        return await self._call(ops_.get_resources, self._ops, resources_id)

    async def _get_latest_resources(self) -> ResourcesUpdate | None:
        return await self._call(ops_.get_latest_resources, self._ops)

    async def _query_resources(
        self, query: q.ResourcesQuery, where: NormalizedFilter
    ) -> PaginatedResult[ResourcesUpdate]:
        args = (where, query.sort_by, query.sort_order, query.limit, query.offset)
        return await self._call(ops_.query_resources, self._ops, *args)

    # ------------------------------------------------------------------ workers

    async def _query_workers(self, query: q.WorkerQuery, where: NormalizedFilter) -> PaginatedResult[Worker]:
        args = (where, query.sort_by, query.sort_order, query.limit, query.offset)
        return await self._call(ops_.query_workers, self._ops, *args, guarded=True)

    async def _get_worker(self, worker_id: str) -> Worker | None:
        return await self._call(ops_.get_worker, self._ops, worker_id)

    async def _update_worker(self, request: q.WorkerHeartbeat) -> Worker:
        if request.heartbeat_stats is not UNSET:
            dump_json("heartbeat_stats", request.heartbeat_stats)
        return await self._call(self._heartbeat, request.worker_id, request.heartbeat_stats, write=True)

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


# ---------------------------------------------------------------------------------- the store's thread

_STOP = object()


def _translate(error: BaseException, path: str) -> BaseException:
    """Turn a lock timeout into an actionable store error; leave other errors alone."""
    if isinstance(error, sqlite3.OperationalError) and "locked" in str(error):
        translated = StoreError(
            f"The SQLite store {path} stayed locked by another connection for longer than the busy "
            "timeout. Raise busy_timeout or reduce the number of processes writing to this file."
        )
        translated.__cause__ = error
        return translated
    return error


class _Executor:
    """One thread that owns the SQLite connection and runs queued ``fn(*args)`` jobs one at a time, each
    in its own transaction; callers on any event loop await an asyncio future, settled after the commit.

    Args:
        connect: Opens the connection; runs on the thread. Its exception is re-raised by the constructor.
        path: For error messages.
        on_commit: Called after every successful write commit (e.g. to wake waiters).
    """

    def __init__(
        self, connect: Callable[[], sqlite3.Connection], *, path: str, on_commit: Callable[[], None]
    ) -> None:
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._lock = threading.Lock()  # guards closed against a job queued after the stop
        self.closed = False
        """True once `close` (or `request_stop`) was called."""
        self._path = path
        self._on_commit = on_commit
        self._startup_error: BaseException | None = None
        self.corrupt: StoreCorruptError | None = None
        """Set once a call found the database file damaged; every later call raises it."""
        self._exited = threading.Event()
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._main, args=(connect, ready), name=f"agl-sqlite:{path}", daemon=True
        )
        self._thread.start()
        ready.wait()
        if self._startup_error is not None:
            error, self._startup_error = self._startup_error, None
            raise error

    def submit(self, fn: Callable[..., _T], args: tuple[Any, ...], write: bool) -> asyncio.Future[_T]:
        """Queue ``fn(*args)``; await the returned future for the result, which comes after the commit."""
        if self.corrupt is not None:
            raise self.corrupt
        future: asyncio.Future[_T] = asyncio.get_running_loop().create_future()
        with self._lock:
            if self.closed:
                raise StoreClosedError("The SQLite store is closed; open a new SqliteLightningStore.")
            self._queue.put((fn, args, write, future))
        return future

    async def close(self) -> None:
        """Finish every job queued so far, close the connection and stop the thread."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            already, self.closed = self.closed, True
            if not already:
                self._queue.put((_STOP, (), False, future))
        if not already:
            await future
        elif not self._exited.is_set():  # another caller is closing: wait for the thread to finish
            await asyncio.to_thread(self._exited.wait)

    def request_stop(self) -> None:
        """Ask the thread to stop after the queued jobs, without waiting (finalizers, sync code)."""
        with self._lock:
            if not self.closed:
                self.closed = True
                self._queue.put((_STOP, (), False, None))

    def _main(self, connect: Callable[[], sqlite3.Connection], ready: threading.Event) -> None:
        try:
            conn = connect()
        except BaseException as exc:
            self._startup_error = exc
            self.closed = True
            self._exited.set()
            ready.set()
            return
        ready.set()
        while True:
            fn, args, write, future = self._queue.get()
            if fn is _STOP:
                break
            ok, value = self._run(conn, fn, args, write)
            _deliver(future, ok, value)
        try:
            conn.close()
        finally:
            self._exited.set()
            _deliver(future, True, None)

    def _run(
        self, conn: sqlite3.Connection, fn: Callable[..., Any], args: tuple[Any, ...], write: bool
    ) -> Any:
        """Run one job in its own transaction: ``(True, result)`` or ``(False, error)``."""
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = fn(*args)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if conn.in_transaction:
                conn.execute("COMMIT")
        except Exception as exc:
            return False, self._note_corruption(_translate(exc, self._path))
        if write:
            with contextlib.suppress(Exception):  # a failed notification must not lose results
                self._on_commit()
        if result.__class__ is DeferredError:
            return False, result.error
        return True, result

    def _note_corruption(self, error: BaseException) -> BaseException:
        """A damaged file: remember it, so every later call is refused instead of half-working."""
        if not is_corruption(error):
            return error
        if self.corrupt is None:
            self.corrupt = corrupt_error(self._path, str(error))
            self.corrupt.__cause__ = error
        return self.corrupt


def _deliver(future: asyncio.Future[Any] | None, ok: bool, value: Any) -> None:
    """Settle `future` on its own loop (skipped when the caller gave up or its loop is closed)."""
    if future is None:
        return

    def settle() -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    with contextlib.suppress(RuntimeError):  # the caller's loop is closed: nobody waits any more
        future.get_loop().call_soon_threadsafe(settle)
