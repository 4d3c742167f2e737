"""The store thread of `SqliteLightningStore`: one writer thread that owns the connection, and a queue.

Callers on any event loop put a job on the queue and await an asyncio future; the thread runs the jobs
one at a time, each in its own transaction, and resolves the future through
``loop.call_soon_threadsafe`` after the job's transaction committed, so a result is never delivered
before the data it reports is on disk (in the WAL).

Jobs declare a mode: `READ` (one statement, runs in autocommit), `READ_TX` (several reads that need
one snapshot: ``BEGIN``), `WRITE` (``BEGIN IMMEDIATE``: the database's write lock, across processes) or
`WRITE_ONE` (one write statement: autocommit, SQLite makes it its own transaction).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, Final, TypeVar

from agl_core.store.errors import StoreClosedError, StoreCorruptError, StoreError

__all__ = ["READ", "READ_TX", "WRITE", "WRITE_ONE", "DeferredError", "SqliteExecutor"]

T = TypeVar("T")

READ: Final = 0
"""A job that runs a single SELECT: no explicit transaction needed."""
READ_TX: Final = 1
"""A job of several reads that must see one snapshot (a deferred transaction)."""
WRITE: Final = 2
"""A job that writes (``BEGIN IMMEDIATE``: the database's write lock, across processes)."""
WRITE_ONE: Final = 3
"""A job that writes with exactly one statement and cannot fail after it (runs in autocommit)."""

_STOP = object()


class DeferredError:
    """Job result meaning "commit what the job wrote, then raise `error` to the caller"."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


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
    """Runs ``fn(*args)`` jobs against one SQLite connection owned by a dedicated thread.

    Args:
        connect: Opens the connection; runs on the thread. Its exception is re-raised by the constructor.
        path: For error messages.
        on_commit: Called after every successful write commit (e.g. to wake waiters).
    """

    def __init__(
        self, connect: Callable[[], sqlite3.Connection], *, path: str, on_commit: Callable[[], None]
    ) -> None:
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._lock = threading.Lock()  # guards _closed against a job queued after the stop
        self._closed = False
        self._path = path
        self._on_commit = on_commit
        self._conn: sqlite3.Connection | None = None
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

    @property
    def closed(self) -> bool:
        """True once `close` (or `request_stop`) was called."""
        return self._closed

    def submit(self, fn: Callable[..., T], args: tuple[Any, ...], mode: int) -> asyncio.Future[T]:
        """Queue ``fn(*args)`` (mode `READ`, `READ_TX`, `WRITE` or `WRITE_ONE`); await the returned future
        for the result, which comes after the job's transaction committed."""
        if self.corrupt is not None:
            raise self.corrupt
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        with self._lock:
            if self._closed:
                raise StoreClosedError("The SQLite store is closed; open a new SqliteLightningStore.")
            self._queue.put((fn, args, mode, future))
        return future

    async def close(self) -> None:
        """Finish every job queued so far, close the connection and stop the thread."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            already = self._closed
            if not already:
                self._closed = True
                self._queue.put((_STOP, (), READ, future))
        if not already:
            await future
        elif not self._exited.is_set():  # another caller is closing: wait for the thread to finish
            await asyncio.to_thread(self._exited.wait)

    def request_stop(self) -> None:
        """Ask the thread to stop after the queued jobs, without waiting (finalizers, sync code)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._queue.put((_STOP, (), READ, None))

    # ------------------------------------------------------------------ thread side

    def _main(self, connect: Callable[[], sqlite3.Connection], ready: threading.Event) -> None:
        try:
            self._conn = connect()
        except BaseException as exc:
            self._startup_error = exc
            self._closed = True
            self._exited.set()
            ready.set()
            return
        ready.set()
        while True:
            fn, args, mode, future = self._queue.get()
            if fn is _STOP:
                break
            ok, value = self._run(self._conn, fn, args, mode)
            _deliver(future, ok, value)
        try:
            self._conn.close()
        finally:
            self._exited.set()
            if future is not None:
                _deliver(future, True, None)

    def _run(
        self, conn: sqlite3.Connection, fn: Callable[..., Any], args: tuple[Any, ...], mode: int
    ) -> tuple[bool, Any]:
        """Run one job in its own transaction (autocommit for `READ` and `WRITE_ONE`)."""
        try:
            if mode in (READ, WRITE_ONE):
                result = fn(*args)
            else:
                conn.execute("BEGIN IMMEDIATE" if mode == WRITE else "BEGIN")
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
        if mode >= WRITE:
            with contextlib.suppress(Exception):  # a failed notification must not lose results
                self._on_commit()
        if result.__class__ is DeferredError:
            return False, result.error
        return True, result

    def _note_corruption(self, error: BaseException) -> BaseException:
        """A damaged file: remember it, so every later call is refused instead of half-working."""
        from agl_core.store._sqlite_schema import corrupt_error, is_corruption

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
