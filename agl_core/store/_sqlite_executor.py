"""The store thread of `SqliteLightningStore`: a job queue with group commit, and an inline fast path.

One dedicated thread owns the store's SQLite connection. Callers on any event loop submit a job and
await an asyncio future; the thread resolves it through ``loop.call_soon_threadsafe``.

Jobs declare a mode: `READ` (one statement, runs in autocommit), `READ_TX` (several reads that need
one snapshot), `WRITE`, or `WRITE_ONE` (one write statement: autocommit when alone). Group commit:
the thread takes every job waiting in the queue (up to `MAX_BATCH`), runs them in one transaction
(``BEGIN IMMEDIATE`` if any job writes), each multi-statement write job inside its own savepoint so a
failing job rolls back only its own changes, commits once, and only then resolves the futures. A
result is never delivered before the data it reports is committed.

**Inline fast path.** Handing a job to another thread and back costs more than most jobs (two thread
wake-ups, ~40 µs here). So when a call finds the store idle, with no other call of the store in
flight, it runs on the caller's thread instead, under conditions that keep it from ever *waiting*:

- the busy timeout is 0 while a job runs inline, so a database locked by another process sends the
  job to the thread (which waits for the lock with the configured timeout) instead of stalling;
- automatic WAL checkpoints are off (``wal_autocheckpoint = 0``): checkpoints, the only step that
  fsyncs under ``synchronous = NORMAL``, run on the thread every `CHECKPOINT_EVERY` write commits.

What remains inline is the SQL itself on pages cached in memory and the commit's small WAL append into
the OS page cache. The caller still yields to its event loop once before it gets the result, so a
task that calls the store in a loop cannot starve the others. As soon as two calls overlap, every
call but the first goes through the queue, where group commit takes over (`inline=False` turns the
fast path off).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Final, TypeVar

from agl_core.store.errors import StoreClosedError, StoreCorruptError, StoreError

__all__ = [
    "CHECKPOINT_EVERY",
    "MAX_BATCH",
    "READ",
    "READ_TX",
    "WRITE",
    "WRITE_ONE",
    "DeferredError",
    "SqliteExecutor",
]

T = TypeVar("T")
MAX_BATCH = 256
"""Most jobs committed together in one transaction."""
CHECKPOINT_EVERY = 256
"""Write commits between two WAL checkpoints (SQLite's own default is about 1,000 WAL pages)."""

READ: Final = 0
"""A job that runs a single SELECT: no explicit transaction needed."""
READ_TX: Final = 1
"""A job of several reads that must see one snapshot (a deferred transaction)."""
WRITE: Final = 2
"""A job that writes (``BEGIN IMMEDIATE``: the database's write lock, across processes)."""
WRITE_ONE: Final = 3
"""A job that writes with exactly one statement and cannot fail after it: alone, it runs in autocommit
(SQLite makes the statement its own transaction and commits it before ``execute`` returns); in a group
it needs no savepoint (SQLite undoes a failed statement by itself)."""

_Outcome = tuple[bool, Any]
_Settle = list[tuple["asyncio.Future[Any]", bool, Any]]


class DeferredError:
    """Job result meaning "commit what the job wrote, then raise `error` to the caller"."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


_STOP = object()
_CHECKPOINT = object()


def _is_busy(error: BaseException) -> bool:
    """Whether `error` is SQLite's "database is locked" (another connection holds the lock)."""
    return isinstance(error, sqlite3.OperationalError) and "locked" in str(error)


def _translate(error: BaseException, path: str) -> BaseException:
    """Turn a lock timeout into an actionable store error; leave other errors alone."""
    if _is_busy(error):
        translated = StoreError(
            f"The SQLite store {path} stayed locked by another connection for longer than the busy "
            "timeout. Raise busy_timeout or reduce the number of processes writing to this file."
        )
        translated.__cause__ = error
        return translated
    return error


class _Done:
    """The outcome of a job that ran inline; awaiting it yields to the event loop once, then returns it.

    The yield keeps a task that calls the store in a loop from starving the others (one loop pass,
    like ``asyncio.sleep(0)``); until the caller resumes, the call counts as in flight.
    """

    __slots__ = ("_executor", "_ok", "_value")

    def __init__(self, executor: SqliteExecutor, ok: bool, value: Any) -> None:
        self._executor, self._ok, self._value = executor, ok, value

    def __await__(self) -> Generator[None, None, Any]:
        try:
            yield
        finally:
            self._executor._release()
        if self._ok:
            return self._value
        raise self._value


class SqliteExecutor:
    """Runs ``fn(*args)`` jobs against one SQLite connection owned by a dedicated thread.

    Args:
        connect: Opens the connection; runs on the thread. Its exception is re-raised by the constructor.
        path: For error messages.
        on_commit: Called after every successful write commit (e.g. to wake waiters).
        busy_timeout: Seconds the thread waits for another connection's lock.
        inline: Run a call on the caller's thread when nothing else is in flight (module docstring).
    """

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        *,
        path: str,
        on_commit: Callable[[], None],
        busy_timeout: float = 30.0,
        inline: bool = True,
    ) -> None:
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._lock = threading.Lock()  # guards _closed, _in_flight and the decision to go inline
        self._run_lock = threading.Lock()  # held while anyone uses the connection
        self._closed = False
        self._in_flight = 0  # calls submitted and not yet settled on their loop
        self._writes = 0  # write commits since the last checkpoint
        self._checkpoint_queued = False
        self._busy_sql = f"PRAGMA busy_timeout = {max(0, int(busy_timeout * 1000))}"
        self._busy_zero = False  # the connection's busy timeout is 0 (set by the inline path)
        self.inline = inline
        """Whether idle-time calls may run on the caller's thread (can be switched at any time)."""
        self._path = path
        self._on_commit = on_commit
        self._conn: sqlite3.Connection | None = None
        self._cursor: sqlite3.Cursor | None = None  # runs BEGIN/COMMIT/SAVEPOINT/PRAGMA
        self._checkpoint_conn: sqlite3.Connection | None = None  # opened by the first checkpoint
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

    def submit(self, fn: Callable[..., T], args: tuple[Any, ...], mode: int) -> Awaitable[T]:
        """Run ``fn(*args)`` (mode `READ`, `READ_TX`, `WRITE` or `WRITE_ONE`) inline or on the thread.

        Returns what to await (at once) for the result, which comes after the job's transaction
        committed: an asyncio future for a job on the thread, a `_Done` for one that ran inline. A
        plain function rather than a coroutine: one coroutine frame less on every store call.
        """
        loop = asyncio.get_running_loop()
        if self.corrupt is not None:
            raise self.corrupt
        with self._lock:
            if self._closed:
                raise StoreClosedError("The SQLite store is closed; open a new SqliteLightningStore.")
            self._in_flight += 1
            if not (self.inline and self._in_flight == 1 and self._run_lock.acquire(blocking=False)):
                future: asyncio.Future[T] = loop.create_future()
                self._queue.put((fn, args, mode, loop, future))
                return future
        try:
            outcome = self._run_inline(fn, args, mode)
        except BaseException:  # KeyboardInterrupt, SystemExit: the call is over
            self._release()
            raise
        finally:
            self._run_lock.release()
        if outcome is None:  # the database is locked by another process: let the thread wait for it
            with self._lock:
                if not self._closed:
                    future = loop.create_future()
                    self._queue.put((fn, args, mode, loop, future))
                    return future
            outcome = (False, StoreClosedError("The SQLite store was closed while the call waited."))
        return _Done(self, *outcome)

    def _translate(self, error: BaseException) -> BaseException:
        return self._note_corruption(_translate(error, self._path))

    def _note_corruption(self, error: BaseException) -> BaseException:
        """A damaged file: remember it, so every later call is refused instead of half-working."""
        from agl_core.store._sqlite_schema import corrupt_error, is_corruption

        if self.corrupt is None and is_corruption(error):
            self.corrupt = corrupt_error(self._path, str(error))
            self.corrupt.__cause__ = error
        return self.corrupt if self.corrupt is not None and is_corruption(error) else error

    async def close(self) -> None:
        """Finish every job queued so far, close the connection and stop the thread."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            already = self._closed
            if not already:
                self._closed = True
                self._in_flight += 1
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

    def _release(self) -> None:
        """An inline call's caller has its result: the call is no longer in flight."""
        with self._lock:
            self._in_flight -= 1

    def _settle(self, items: _Settle) -> None:
        """Loop-side: settle futures (skipping the ones whose caller gave up)."""
        with self._lock:
            self._in_flight -= len(items)
        for future, ok, value in items:
            if future.done():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    # ------------------------------------------------------------------ inline

    def _run_inline(self, fn: Callable[..., Any], args: tuple[Any, ...], mode: int) -> _Outcome | None:
        """Run one job on the caller's thread (holding the run lock); None: the database was locked."""
        conn, cur = self._conn, self._cursor
        assert conn is not None and cur is not None
        if not self._busy_zero:
            cur.execute("PRAGMA busy_timeout = 0")
            self._busy_zero = True
        committed = False
        try:
            if mode in (READ, WRITE_ONE):
                outcome: _Outcome = (True, fn(*args))
                committed = mode == WRITE_ONE
            else:
                cur.execute("BEGIN IMMEDIATE" if mode >= WRITE else "BEGIN")
                outcome = self._run_single(conn, cur, (fn, args, mode), translate=False)
                if conn.in_transaction:
                    cur.execute("COMMIT")
                    committed = mode >= WRITE
        except Exception as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    cur.execute("ROLLBACK")
            return None if _is_busy(exc) else (False, self._note_corruption(exc))
        if committed:
            self._committed(inline=True)
        elif not outcome[0] and _is_busy(outcome[1]):  # nothing was written: the thread will retry
            return None
        if not outcome[0]:
            return False, self._note_corruption(outcome[1])
        return outcome

    def _committed(self, *, inline: bool) -> None:
        """After a write commit: notify, and checkpoint the WAL on the thread when it is due."""
        with contextlib.suppress(Exception):  # a failed notification must not lose results
            self._on_commit()
        self._writes += 1
        if inline and self._writes >= CHECKPOINT_EVERY and not self._checkpoint_queued:
            self._checkpoint_queued = True
            self._queue.put((_CHECKPOINT, (), READ, None, None))

    # ------------------------------------------------------------------ thread side

    def _main(self, connect: Callable[[], sqlite3.Connection], ready: threading.Event) -> None:
        try:
            self._conn = connect()
            self._cursor = self._conn.cursor()
            self._cursor.execute("PRAGMA wal_autocheckpoint = 0")  # checkpoints run in `_checkpoint`
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
            checkpoint = False
            for index in range(len(batch) - 1, -1, -1):
                marker = batch[index][0]
                if marker is _STOP:
                    stop_job = batch[index]
                    del batch[index:]
                elif marker is _CHECKPOINT:
                    checkpoint = True
                    del batch[index]
            if batch:
                with self._run_lock:
                    deliveries = self._run_batch(batch)
                for loop, items in deliveries:  # after releasing the connection: the next call may go inline
                    self._deliver(loop, items)
            if checkpoint or self._writes >= CHECKPOINT_EVERY:
                self._checkpoint()
        try:
            if self._checkpoint_conn is not None:
                self._checkpoint_conn.close()
            with self._run_lock:
                self._conn.close()
        finally:
            self._exited.set()
            loop, future = stop_job[3], stop_job[4]
            if loop is not None:
                self._deliver(loop, [(future, True, None)])

    def _checkpoint(self) -> None:
        """Copy the WAL into the database file without holding calls up, so the WAL starts over.

        Two PASSIVE checkpoints (they never wait for readers or writers) on a connection of their own:
        the first copies the bulk while calls go on; the second, with the store's connection held,
        copies the few frames committed meanwhile. The WAL is then fully copied, so the next write
        restarts it from the beginning instead of growing it.
        """
        self._writes = 0  # not under the run lock: a lost increment only delays the next checkpoint
        self._checkpoint_queued = False
        if self._path == ":memory:":
            return
        with contextlib.suppress(sqlite3.Error):  # busy or failed: the next one catches up
            if self._checkpoint_conn is None:
                self._checkpoint_conn = sqlite3.connect(self._path, isolation_level=None)
            self._checkpoint_conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            with self._run_lock:
                self._checkpoint_conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def _run_batch(self, batch: list[tuple[Any, ...]]) -> list[tuple[asyncio.AbstractEventLoop, _Settle]]:
        """Run `batch` (see the module docstring); return the results to deliver, per loop."""
        conn, cur = self._conn, self._cursor
        assert conn is not None and cur is not None
        if self._busy_zero:
            cur.execute(self._busy_sql)
            self._busy_zero = False
        if len(batch) == 1 and (batch[0][2] == READ or batch[0][2] == WRITE_ONE):
            job = batch[0]
            try:
                outcome: _Outcome = (True, job[0](*job[1]))
            except Exception as exc:
                outcome = (False, self._translate(exc))
            else:
                if job[2] == WRITE_ONE:
                    self._committed(inline=False)
            return [(job[3], [(job[4], *outcome)])]
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
            error = self._translate(exc)
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    cur.execute("ROLLBACK")
            outcomes = [(False, error)] * len(batch)
        else:
            if write:
                self._committed(inline=False)
        if len(batch) == 1:
            job = batch[0]
            return [(job[3], [(job[4], *outcomes[0])])]
        by_loop: dict[asyncio.AbstractEventLoop, _Settle] = {}
        for job, (ok, value) in zip(batch, outcomes, strict=True):
            items = by_loop.get(job[3])
            if items is None:
                by_loop[job[3]] = [(job[4], ok, value)]
            else:
                items.append((job[4], ok, value))
        return list(by_loop.items())

    def _run_single(
        self, conn: sqlite3.Connection, cur: sqlite3.Cursor, job: tuple[Any, ...], *, translate: bool = True
    ) -> _Outcome:
        """One job alone in its transaction: on error the whole transaction is rolled back."""
        try:
            result = job[0](*job[1])
        except Exception as exc:
            if conn.in_transaction:
                cur.execute("ROLLBACK")
            return False, self._translate(exc) if translate else exc
        if result.__class__ is DeferredError:
            return False, result.error
        return True, result

    def _run_savepoint(self, conn: sqlite3.Connection, cur: sqlite3.Cursor, job: tuple[Any, ...]) -> _Outcome:
        """One job of a group: a savepoint confines a failure to the job's own changes.

        If SQLite itself aborted the transaction (I/O error, disk full), the earlier jobs' changes are
        gone too, so the error propagates and fails the whole group.
        """
        if job[2] != WRITE:  # a read, or one write statement: SQLite undoes a failed statement itself
            try:
                return True, job[0](*job[1])
            except Exception as exc:
                if job[2] == WRITE_ONE and not conn.in_transaction:
                    raise  # SQLite aborted the whole transaction (I/O error, disk full)
                return False, self._translate(exc)
        cur.execute("SAVEPOINT job")
        try:
            result = job[0](*job[1])
        except Exception as exc:
            if not conn.in_transaction:
                raise
            cur.execute("ROLLBACK TO job")
            cur.execute("RELEASE job")
            return False, self._translate(exc)
        cur.execute("RELEASE job")
        if result.__class__ is DeferredError:
            return False, result.error
        return True, result

    def _deliver(self, loop: asyncio.AbstractEventLoop, items: _Settle) -> None:
        try:
            loop.call_soon_threadsafe(self._settle, items)
        except RuntimeError:  # the caller's loop is closed: nobody waits any more
            with self._lock:
                self._in_flight -= len(items)
