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
    """The pool and the LISTEN connection of one event loop, with the waiters it wakes."""

    def __init__(self) -> None:
        self.pool: asyncpg.Pool | None = None
        self.creating: asyncio.Future[asyncpg.Pool] | None = None
        self.listener: asyncpg.Connection | None = None
        self.waiters: set[asyncio.Future[None]] = set()


class PostgresConnection:
    """Pools (one per event loop), the one-time migration, the retry loop and change notifications."""

    def __init__(self, settings: PostgresSettings) -> None:
        self.settings = settings
        self.schema: str = settings.options["schema"]
        self.retry_timeout: float = settings.options["retry_timeout"]
        self.display_uri = settings.display_uri
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

    async def _pool(self, state: _LoopState) -> asyncpg.Pool:
        if state.pool is not None:
            return state.pool
        if state.creating is None:
            state.creating = asyncio.get_running_loop().create_future()
            try:
                pool = await self._create_pool()
            except BaseException as exc:
                state.creating.set_exception(exc)
                state.creating.exception()  # retrieved: later callers get their own try
                state.creating = None
                raise
            state.pool = pool
            state.creating.set_result(pool)
            return pool
        return await asyncio.shield(state.creating)

    def connect_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of `asyncpg.connect` for this store (the DSN not included)."""
        options = self.settings.options
        return {
            "timeout": options["connect_timeout"],
            "command_timeout": options["command_timeout"],
            "server_settings": {"search_path": quote_ident(self.schema), "application_name": "agl-postgres"},
        }

    async def _create_pool(self) -> asyncpg.Pool:
        options = self.settings.options
        pool = await asyncpg.create_pool(
            self.settings.dsn,
            min_size=options["pool_min_size"],
            max_size=options["pool_max_size"],
            max_inactive_connection_lifetime=300.0,
            reset=_keep_session,
            **self.connect_kwargs(),
        )
        if not self._migrated:
            try:
                async with pool.acquire(timeout=options["acquire_timeout"]) as conn:
                    await migrate(conn, self.schema)
            except BaseException:
                pool.terminate()
                raise
            self._migrated = True
        return pool

    async def close(self) -> None:
        """Close every pool and listener: this loop's directly, other running loops' on their loop."""
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
                pool = state.pool or await self._pool(state)
                async with pool.acquire(timeout=self.settings.options["acquire_timeout"]) as conn:
                    try:
                        return await call(conn, retrying)
                    except _CONNECTION_ERRORS:
                        conn.terminate()  # never hand a broken connection back to the pool
                        raise
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
                await self._pool(state)  # migrated first: NOTIFY comes from the schema's trigger
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


async def _keep_session(conn: Any) -> None:
    """Pool release hook: nothing to undo.

    asyncpg's default reset sends ``RESET ALL; CLOSE ALL; UNLISTEN *; ...`` on every release, one more
    round trip per store call. Store calls leave no session state (no ``SET``, cursors, listeners or
    session locks), and asyncpg still rolls back a transaction left open before this hook runs.
    """


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _close_state(state: _LoopState) -> None:
    if state.listener is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(state.listener.close(), 5.0)
    if state.pool is not None:
        try:
            await asyncio.wait_for(state.pool.close(), 10.0)
        except Exception:
            state.pool.terminate()


def _describe(exc: BaseException) -> str:
    """A one-line description of a connection failure (driver messages carry no password)."""
    text = str(exc).strip() or "connection lost"
    return f"{type(exc).__name__}: {text}"
