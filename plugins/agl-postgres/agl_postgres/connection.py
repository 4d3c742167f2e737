"""Connections of a `PostgresLightningStore`: one asyncpg pool per event loop, migrations, retries, LISTEN.

asyncpg pools and connections belong to the event loop that created them, so a store used from several
threads (each running its own loop) keeps one pool per loop, created on first use. Every call goes
through `PostgresConnection.run`, which retries:

- at once, a transaction PostgreSQL aborted as a deadlock or serialization failure (nothing of it was
  applied);
- with exponential backoff for up to ``retry_timeout`` seconds, a call that lost its connection or
  could not get one (server restarting, network); then `StoreUnavailableError` is raised. The call is
  told it is a retry, because its earlier try may have been committed with the acknowledgement lost.

A connection dropped in the middle of a transaction is rolled back by the server, so a call is either
wholly applied or not at all. Messages name the server by its URI with the password hidden; the
driver's own messages never contain the password.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

from agl_core.store import StoreClosedError
from agl_postgres.errors import StoreUnavailableError
from agl_postgres.schema import FINISHED_CHANNEL, migrate, quote_ident
from agl_postgres.uri import PostgresSettings

__all__ = ["Call", "PostgresConnection"]

T = TypeVar("T")

Call = Callable[[Any, bool], Awaitable[T]]
"""One store call on a connection: ``call(connection, retrying)``."""

_FIRST_DELAY = 0.05
_MAX_DELAY = 1.0

_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncio.TimeoutError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.InterfaceError,  # "connection is closed", "connection was closed in the middle"
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.ConnectionFailureError,
    asyncpg.exceptions.InternalClientError,  # a protocol step interrupted by the connection's loss
)
_ROLLED_BACK_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.DeadlockDetectedError,
    asyncpg.exceptions.SerializationError,
)


class _LoopState:
    """The connections and the LISTEN connection of one event loop, with the waiters they wake."""

    def __init__(self) -> None:
        self.idle: list[asyncpg.Connection] = []
        """Open connections nobody uses, the most recently used last."""
        self.size = 0
        """Connections open, in use or being opened."""
        self.queue: collections.deque[asyncio.Future[asyncpg.Connection | None]] = collections.deque()
        """Calls waiting for a connection: given one, or None when they may open one."""
        self.migrating = asyncio.Lock()
        self.listener: asyncpg.Connection | None = None
        self.waiters: set[asyncio.Future[None]] = set()


class PostgresConnection:
    """Connections (a small pool per event loop), the one-time migration, retries and notifications.

    The pool is this module's own rather than ``asyncpg.Pool``: taking and returning a connection
    is a list pop and append, where asyncpg's pool spends about as much client CPU per call as the
    query itself (a task and a timeout per acquire, a shielded task per release; measured with
    ``tools/driver_bench.py``). A connection goes back to the pool only when its call ended cleanly
    or with a server error outside a transaction; after anything else (a lost connection, a
    cancellation in the middle of a query) it is closed.
    """

    def __init__(self, settings: PostgresSettings) -> None:
        self.settings = settings
        self.schema: str = settings.options["schema"]
        self.retry_timeout: float = settings.options["retry_timeout"]
        self.display_uri = settings.display_uri
        self._max_size: int = settings.options["pool_max_size"]
        self._min_size: int = settings.options["pool_min_size"]
        self._acquire_timeout: float = settings.options["acquire_timeout"]
        self._lock = threading.Lock()
        self._loops: dict[asyncio.AbstractEventLoop, _LoopState] = {}
        self._migrated = False
        self.closed = False
        self.retries = 0
        """Calls retried after a connection failure, deadlock or serialization failure."""

    # ------------------------------------------------------------------ pools

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.closed:
                raise StoreClosedError("The PostgreSQL store is closed; open a new one.")
            state = self._loops.get(loop)
            if state is None:
                for gone in [other for other in self._loops if other.is_closed()]:
                    del self._loops[gone]  # its loop ended; its connections cannot be used again
                state = self._loops[loop] = _LoopState()
            return state

    def connect_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of `asyncpg.connect` for this store (the DSN not included)."""
        options = self.settings.options
        return {
            "timeout": options["connect_timeout"],
            "command_timeout": options["command_timeout"],
            "server_settings": {"search_path": quote_ident(self.schema), "application_name": "agl-postgres"},
        }

    async def _open(self, state: _LoopState) -> asyncpg.Connection:
        """A new connection; the first one of this store applies pending migrations."""
        conn = await asyncpg.connect(self.settings.dsn, **self.connect_kwargs())
        if not self._migrated:
            try:
                async with state.migrating:
                    if not self._migrated:
                        await migrate(conn, self.schema)
                        self._migrated = True
            except BaseException:
                conn.terminate()
                raise
        return conn

    async def _acquire(self, state: _LoopState) -> asyncpg.Connection:
        """A connection of this loop: an idle one, a new one while under ``pool_max_size``, or the next
        one released (waiting at most ``acquire_timeout``, then `asyncio.TimeoutError`)."""
        while True:
            while state.idle:
                conn = state.idle.pop()
                if not conn.is_closed():
                    return conn
                state.size -= 1
            if state.size < self._max_size:
                state.size += 1
                try:
                    conn = await self._open(state)
                except BaseException:
                    self._free_slot(state)
                    raise
                if state.size == 1 and self._min_size > 1:
                    await self._fill(state)
                return conn
            loop = asyncio.get_running_loop()
            future: asyncio.Future[asyncpg.Connection | None] = loop.create_future()
            state.queue.append(future)
            expiry = loop.call_later(self._acquire_timeout, _expire, future)
            try:
                given = await future
            except BaseException:
                if future.done() and not future.cancelled() and future.exception() is None:
                    self._give_back(state, future.result())  # handed over as we were cancelled
                raise
            finally:
                expiry.cancel()
                with contextlib.suppress(ValueError):
                    state.queue.remove(future)
            if given is not None and not given.is_closed():
                return given
            if given is not None:
                state.size -= 1

    async def _fill(self, state: _LoopState) -> None:
        """Open idle connections up to ``pool_min_size`` (when a loop opens its first one)."""
        while state.size < self._min_size:
            state.size += 1
            try:
                conn = await self._open(state)
            except BaseException:
                self._free_slot(state)
                raise
            self._give_back(state, conn)

    def _give_back(self, state: _LoopState, conn: asyncpg.Connection) -> None:
        """Return a connection that finished its call cleanly: to a waiting call, else to the idle list."""
        if self.closed or conn.is_closed() or conn.is_in_transaction():
            self._discard(state, conn)
            return
        while state.queue:
            waiter = state.queue.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        state.idle.append(conn)

    def _discard(self, state: _LoopState, conn: asyncpg.Connection) -> None:
        """Close a connection whose state is unknown (never reused) and free its slot."""
        conn.terminate()
        self._free_slot(state)

    @staticmethod
    def _free_slot(state: _LoopState) -> None:
        state.size -= 1
        while state.queue:  # a waiting call may open a connection in the freed slot
            waiter = state.queue.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def close(self) -> None:
        """Close every connection: this loop's directly, other running loops' on their loop."""
        with self._lock:
            self.closed = True
            states = list(self._loops.items())
            self._loops.clear()
        current = asyncio.get_running_loop()
        for loop, state in states:
            for waiter in state.waiters:
                if not waiter.done():
                    loop.call_soon_threadsafe(_wake, waiter)
            if loop is current:
                await _close_state(state)
            elif loop.is_running():
                future = asyncio.run_coroutine_threadsafe(_close_state(state), loop)
                with contextlib.suppress(asyncio.TimeoutError, RuntimeError, Exception):
                    await asyncio.wait_for(asyncio.wrap_future(future), 5.0)

    # ------------------------------------------------------------------ calls

    async def run(self, call: Call[T]) -> T:
        """Run `call` on a pooled connection of this loop, retrying as described in the module doc."""
        state = self._state()
        first_failure: float | None = None
        delay = _FIRST_DELAY
        retrying = False
        while True:
            try:
                conn = await self._acquire(state)
                try:
                    result = await call(conn, retrying)
                except _CONNECTION_ERRORS:
                    self._discard(state, conn)  # never reuse a broken connection
                    raise
                except Exception:
                    self._give_back(state, conn)  # a server or store error: the call rolled back
                    raise
                except BaseException:
                    self._discard(state, conn)  # cancelled: maybe in the middle of a query
                    raise
                self._give_back(state, conn)
                return result
            except _ROLLED_BACK_ERRORS:
                self.retries += 1
                await asyncio.sleep(random.uniform(0, 0.01))
                continue
            except _CONNECTION_ERRORS as exc:
                if self.closed:
                    raise StoreClosedError("The PostgreSQL store is closed; open a new one.") from None
                now = time.monotonic()
                if first_failure is None:
                    first_failure = now
                waited = now - first_failure
                if waited >= self.retry_timeout:
                    raise StoreUnavailableError(self.display_uri, waited, _describe(exc)) from None
                self.retries += 1
                await asyncio.sleep(min(delay, self.retry_timeout - waited) * random.uniform(0.5, 1.0))
                delay = min(delay * 2, _MAX_DELAY)
                retrying = True

    # ------------------------------------------------------------------ notifications

    async def register_waiter(self) -> asyncio.Future[None]:
        """A future resolved when any store on this schema finishes a rollout (best effort).

        Uses one ``LISTEN`` connection per loop; if it cannot be opened, the future resolves only by
        the caller's fallback poll. Call `discard_waiter` when done.
        """
        state = self._state()
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        state.waiters.add(future)
        if state.listener is None or state.listener.is_closed():
            state.listener = None
            with contextlib.suppress(*_CONNECTION_ERRORS, asyncpg.PostgresError):
                if not self._migrated:  # migrated first: NOTIFY comes from the schema's trigger
                    self._give_back(state, await self._acquire(state))
                listener = await asyncpg.connect(self.settings.dsn, **self.connect_kwargs())
                await listener.add_listener(FINISHED_CHANNEL, self._on_notify(state))
                state.listener = listener
        return future

    def discard_waiter(self, future: asyncio.Future[None]) -> None:
        """Forget a future of `register_waiter`."""
        state = self._loops.get(asyncio.get_running_loop())
        if state is not None:
            state.waiters.discard(future)

    def _on_notify(self, state: _LoopState) -> Callable[..., None]:
        schema = self.schema

        def notified(connection: Any, pid: int, channel: str, payload: str) -> None:
            if payload == schema:
                for waiter in list(state.waiters):
                    _wake(waiter)

        return notified


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(asyncio.TimeoutError("no pooled connection was free within acquire_timeout"))


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _close_state(state: _LoopState) -> None:
    if state.listener is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(state.listener.close(), 5.0)
    idle, state.idle = state.idle, []
    for conn in idle:
        try:
            await asyncio.wait_for(conn.close(), 5.0)
        except Exception:
            conn.terminate()


def _describe(exc: BaseException) -> str:
    """A one-line description of a connection failure (driver messages carry no password)."""
    text = str(exc).strip() or "connection lost"
    return f"{type(exc).__name__}: {text}"
