"""The single writer thread of `SqliteLightningStore`: a job queue with group commit.

Every database call runs on one dedicated thread that owns the only connection of the store, so the
event loop never waits on SQLite (or on another process's lock). Callers on any event loop submit a
job and await an asyncio future; the thread resolves it through ``loop.call_soon_threadsafe``.

Jobs declare a mode: `READ` (one statement, runs in autocommit), `READ_TX` (several reads that need
one snapshot), `WRITE`, or `WRITE_ONE` (one write statement: autocommit when alone). Group commit:
the thread takes every job waiting in the queue (up to
`MAX_BATCH`), runs them in one transaction (``BEGIN IMMEDIATE`` if any job writes), each write job
inside its own savepoint so a failing job rolls back only its own changes, commits once, and only then
resolves the futures. A result is never delivered before the data it reports is committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, Final, TypeVar

from agl_core.store.errors import StoreClosedError, StoreError

__all__ = ["MAX_BATCH", "READ", "READ_TX", "WRITE", "WRITE_ONE", "DeferredError", "SqliteExecutor"]

T = TypeVar("T")
MAX_BATCH = 256
"""Most jobs committed together in one transaction."""

READ: Final = 0
"""A job that runs a single SELECT: no explicit transaction needed."""
READ_TX: Final = 1
"""A job of several reads that must see one snapshot (a deferred transaction)."""
WRITE: Final = 2
"""A job that writes (``BEGIN IMMEDIATE``: the database's write lock, across processes)."""
WRITE_ONE: Final = 3
"""A job that writes with exactly one statement and cannot fail after it: alone, it runs in autocommit
(SQLite makes the statement its own transaction and commits it before ``execute`` returns)."""

_Settle = list[tuple["asyncio.Future[Any]", bool, Any]]


class DeferredError:
    """Job result meaning "commit what the job wrote, then raise `error` to the caller"."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


_STOP = object()


def _settle(items: _Settle) -> None:
    """Loop-side: settle futures (skipping the ones whose caller gave up)."""
    for future, ok, value in items:
        if future.done():
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


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


class SqliteExecutor:
    """Runs ``fn(*args)`` jobs on a dedicated thread that owns one SQLite connection.

    Args:
        connect: Opens the connection; runs on the thread. Its exception is re-raised by the constructor.
        path: For error messages.
        on_commit: Called on the thread after every successful commit (e.g. to wake waiters).
    """

    def __init__(
        self, connect: Callable[[], sqlite3.Connection], *, path: str, on_commit: Callable[[], None]
    ) -> None:
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._path = path
        self._on_commit = on_commit
        self._conn: sqlite3.Connection | None = None
        self._cursor: sqlite3.Cursor | None = None  # runs BEGIN/COMMIT/SAVEPOINT
        self._startup_error: BaseException | None = None
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

    @property
    def closed(self) -> bool:
        """True once `close` (or `request_stop`) was called."""
        return self._closed

    def submit(self, fn: Callable[..., T], args: tuple[Any, ...], mode: int) -> asyncio.Future[T]:
        """Queue ``fn(*args)`` (mode `READ`, `READ_TX`, `WRITE` or `WRITE_ONE`) for the thread.

        Returns a future of the running loop that resolves after the job's transaction committed.
        (A plain function rather than a coroutine: one coroutine frame less on every store call.)
        """
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        with self._lock:
            if self._closed:
                raise StoreClosedError("The SQLite store is closed; open a new SqliteLightningStore.")
            self._queue.put((fn, args, mode, future.get_loop(), future))
        return future

    async def close(self) -> None:
        """Finish every job queued so far, close the connection and stop the thread."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            already = self._closed
            if not already:
                self._closed = True
                self._queue.put((_STOP, (), READ, loop, future))
        if not already:
            await future
        elif not self._exited.is_set():  # another caller is closing: wait for the thread to finish
            await asyncio.to_thread(self._exited.wait)

    def request_stop(self) -> None:
        """Ask the thread to stop after the queued jobs, without waiting (finalizers, sync code)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put((_STOP, (), READ, None, None))

    # ------------------------------------------------------------------ thread side

    def _main(self, connect: Callable[[], sqlite3.Connection], ready: threading.Event) -> None:
        try:
            self._conn = connect()
            self._cursor = self._conn.cursor()
        except BaseException as exc:
            self._startup_error = exc
            self._closed = True
            self._exited.set()
            ready.set()
            return
        ready.set()
        get, get_nowait = self._queue.get, self._queue.get_nowait
        stop_job: tuple[Any, ...] | None = None
        empty = self._queue.empty
        while stop_job is None:
            batch = [get()]
            while len(batch) < MAX_BATCH and not empty():
                batch.append(get_nowait())
            for index, job in enumerate(batch):
                if job[0] is _STOP:
                    stop_job = job
                    del batch[index:]
                    break
            if batch:
                self._run_batch(batch)
        try:
            self._conn.close()
        finally:
            self._exited.set()
            loop, future = stop_job[3], stop_job[4]
            if loop is not None:
                self._deliver(loop, [(future, True, None)])

    def _run_batch(self, batch: list[tuple[Any, ...]]) -> None:
        conn, cur = self._conn, self._cursor
        assert conn is not None and cur is not None
        if len(batch) == 1 and (batch[0][2] == READ or batch[0][2] == WRITE_ONE):
            job = batch[0]
            try:
                outcome: tuple[bool, Any] = (True, job[0](*job[1]))
            except Exception as exc:
                outcome = (False, _translate(exc, self._path))
            else:
                if job[2] == WRITE_ONE:
                    with contextlib.suppress(Exception):
                        self._on_commit()
            self._deliver(job[3], [(job[4], *outcome)])
            return
        write = False
        for job in batch:
            if job[2] >= WRITE:
                write = True
                break
        try:
            cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            if len(batch) == 1:
                outcomes = [self._run_single(conn, cur, batch[0])]
            else:
                outcomes = [self._run_savepoint(conn, cur, job) for job in batch]
            if conn.in_transaction:
                cur.execute("COMMIT")
        except Exception as exc:
            error = _translate(exc, self._path)
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    cur.execute("ROLLBACK")
            outcomes = [(False, error)] * len(batch)
        else:
            if write:
                with contextlib.suppress(Exception):  # a failed notification must not lose results
                    self._on_commit()
        if len(batch) == 1:
            job = batch[0]
            self._deliver(job[3], [(job[4], *outcomes[0])])
            return
        by_loop: dict[asyncio.AbstractEventLoop, _Settle] = {}
        for job, (ok, value) in zip(batch, outcomes, strict=True):
            items = by_loop.get(job[3])
            if items is None:
                by_loop[job[3]] = [(job[4], ok, value)]
            else:
                items.append((job[4], ok, value))
        for loop, items in by_loop.items():
            self._deliver(loop, items)

    def _run_single(
        self, conn: sqlite3.Connection, cur: sqlite3.Cursor, job: tuple[Any, ...]
    ) -> tuple[bool, Any]:
        """One job alone in its transaction: on error the whole transaction is rolled back."""
        try:
            result = job[0](*job[1])
        except Exception as exc:
            if conn.in_transaction:
                cur.execute("ROLLBACK")
            return False, _translate(exc, self._path)
        if result.__class__ is DeferredError:
            return False, result.error
        return True, result

    def _run_savepoint(
        self, conn: sqlite3.Connection, cur: sqlite3.Cursor, job: tuple[Any, ...]
    ) -> tuple[bool, Any]:
        """One job of a group: a savepoint confines a failure to the job's own changes.

        If SQLite itself aborted the transaction (I/O error, disk full), the earlier jobs' changes are
        gone too, so the error propagates and fails the whole group.
        """
        if job[2] < WRITE:
            try:
                return True, job[0](*job[1])
            except Exception as exc:
                return False, _translate(exc, self._path)
        cur.execute("SAVEPOINT job")
        try:
            result = job[0](*job[1])
        except Exception as exc:
            if not conn.in_transaction:
                raise
            cur.execute("ROLLBACK TO job")
            cur.execute("RELEASE job")
            return False, _translate(exc, self._path)
        cur.execute("RELEASE job")
        if result.__class__ is DeferredError:
            return False, result.error
        return True, result

    @staticmethod
    def _deliver(loop: asyncio.AbstractEventLoop, items: _Settle) -> None:
        with contextlib.suppress(RuntimeError):  # the caller's loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_settle, items)
