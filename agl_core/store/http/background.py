"""`BackgroundServer`: a `LightningStoreServer` on its own thread and event loop.

For in-process use where the caller's thread must stay free (tests, a trainer that serves its store to
runner processes while the algorithm runs)::

    with BackgroundServer(InMemoryLightningStore()) as server:
        client = LightningStoreClient(server.endpoint)
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, TypeVar, Union

from agl_core.store.base import LightningStore
from agl_core.store.http.server import LightningStoreServer
from agl_core.utils.loop_thread import LoopThread

__all__ = ["BackgroundServer"]

T = TypeVar("T")
StoreSource = Union[LightningStore, Callable[[], Union[LightningStore, Awaitable[LightningStore]]]]  # noqa: UP007


class BackgroundServer:
    """Serve a store from a daemon thread; `start()` returns once the server listens.

    Args:
        store: A store, or a factory called on the server's event loop (it may return an awaitable),
            so a store that binds to its loop is created on the right one.
        close_store: Close the store on `stop()`; defaults to True for a factory, False for an instance.
        startup_timeout: Seconds `start()` and `stop()` wait for the server thread.
        **server_kwargs: Passed to `LightningStoreServer` (host, port, token, ...).
    """

    def __init__(
        self,
        store: StoreSource,
        *,
        close_store: bool | None = None,
        startup_timeout: float = 30.0,
        **server_kwargs: Any,
    ) -> None:
        self._source = store
        self.close_store = (not isinstance(store, LightningStore)) if close_store is None else close_store
        self.startup_timeout = startup_timeout
        self._server_kwargs = server_kwargs
        self.server: LightningStoreServer | None = None
        self.store: LightningStore | None = None
        self._thread = LoopThread("agl-store-server", timeout=startup_timeout)

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The server thread's event loop (None before `start()`)."""
        return self._thread.loop

    @property
    def endpoint(self) -> str:
        """Base URL of the running server."""
        if self.server is None:
            raise RuntimeError("BackgroundServer is not started; call start() first.")
        return self.server.endpoint

    def start(self) -> str:
        """Start the thread, open the store and the server; returns the endpoint."""
        if self._thread.running:
            raise RuntimeError("BackgroundServer is already started.")
        self._thread.start()
        try:
            self.call(self._open)
        except BaseException:
            self.stop()
            raise
        return self.endpoint

    async def _open(self) -> None:
        source = self._source
        store: Any = source if isinstance(source, LightningStore) else source()
        if inspect.isawaitable(store):
            store = await store
        if not isinstance(store, LightningStore):
            raise TypeError(f"The store factory returned {type(store).__name__}, not a LightningStore.")
        self.store = store
        server = LightningStoreServer(store, **self._server_kwargs)
        await server.start()
        self.server = server

    async def _close(self) -> None:
        if self.server is not None:
            await self.server.stop()
        if self.close_store and self.store is not None:
            await self.store.close()

    def call(self, fn: Callable[[], Coroutine[Any, Any, T]], timeout: float | None = None) -> T:
        """Run ``fn()`` on the server's loop from another thread and return its result."""
        if not self._thread.running:
            raise RuntimeError("BackgroundServer is not started.")
        return self._thread.call(fn, timeout=self.startup_timeout if timeout is None else timeout)

    def stop(self) -> None:
        """Stop the server (finishing in-flight requests), close the store if owned, end the thread."""
        if not self._thread.running:
            return
        try:
            self._thread.stop(self._close, timeout=self.startup_timeout)
        finally:
            self.server = None

    def __enter__(self) -> BackgroundServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
