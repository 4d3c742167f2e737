"""Compatibility module for Agent Lightning 0.3's ``agentlightning.utils.server_launcher``.

Listed in docs/migrating-from-agent-lightning.md. `PythonServerLauncher` serves a web application in the
calling event loop (``launch_mode="asyncio"``) or in a background thread with its own loop (``"thread"``),
optionally waits until a health URL answers, and stops it again. agl's HTTP servers are aiohttp, so the
application is an ``aiohttp.web.Application`` (0.3: a FastAPI app served by uvicorn/gunicorn);
``launch_mode="mp"`` and ``n_workers > 1`` (gunicorn) are refused with a `ValueError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
from aiohttp import web

__all__ = ["LaunchMode", "PythonServerLauncher", "PythonServerLauncherArgs"]

# named by its 0.3 path, so logging set up for agl_core (or agentlightning) covers it
logger = logging.getLogger("agl_core.utils.server_launcher")

LaunchMode = Literal["asyncio", "thread", "mp"]
"""Where the server runs: the calling event loop, a background thread, or (0.3 only) a process."""

_HEALTH_POLL_SECONDS = 0.1


@dataclass
class PythonServerLauncherArgs:
    """How `PythonServerLauncher` serves (Agent Lightning 0.3's fields)."""

    port: int | None = None
    """Port to bind; None picks a free one (read `PythonServerLauncher.endpoint` after `start`)."""
    host: str | None = None
    """Interface to bind; None means 0.0.0.0, as in 0.3."""
    access_host: str | None = None
    """Host clients use to reach the server (default: ``host``, or 127.0.0.1 for a wildcard host)."""
    launch_mode: LaunchMode = "asyncio"
    """``"asyncio"`` or ``"thread"`` (``"mp"`` is refused)."""
    n_workers: int = 1
    """Server processes; only 1 is supported."""
    healthcheck_url: str | None = None
    """Path polled after start until it answers 2xx (None: no check)."""
    log_level: int = logging.INFO
    """Level of the access and server logs."""
    access_log: bool = False
    """Log every request."""
    startup_timeout: float = 60.0
    """Seconds to wait for the health check."""
    kill_unhealthy_server: bool = True
    """Stop the server when the health check fails (else leave it running and raise)."""
    thread_join_timeout: float = 10.0
    """Seconds to wait for the server thread to end on stop."""
    process_join_timeout: float = 10.0
    """Unused (no process mode)."""
    timeout_keep_alive: int = 30
    """Seconds an idle keep-alive connection stays open."""


@contextlib.asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


class PythonServerLauncher:
    """Serve an aiohttp application per `PythonServerLauncherArgs`; `start` / `stop` / `run_forever`.

    Args:
        app: The application to serve.
        args: Where and how to serve it.
        serve_context: An async context manager entered before serving and exited after stopping.
    """

    def __init__(
        self,
        app: web.Application,
        args: PythonServerLauncherArgs,
        serve_context: AbstractAsyncContextManager[Any] | None = None,
    ) -> None:
        if not isinstance(app, web.Application):
            raise TypeError(
                "PythonServerLauncher serves aiohttp.web.Application objects in agl, got "
                f"{type(app).__name__}; serve an ASGI (FastAPI) app with uvicorn directly."
            )
        if args.launch_mode not in ("asyncio", "thread"):
            raise ValueError(
                f"launch_mode={args.launch_mode!r} is not supported by agl's launcher: "
                "use 'asyncio' or 'thread'."
            )
        if args.n_workers != 1:
            raise ValueError(
                f"n_workers={args.n_workers} is not supported by agl's launcher: serve with one worker."
            )
        self.app = app
        self.args = args
        self.serve_context = serve_context
        self._host = args.host if args.host is not None else "0.0.0.0"
        self._port = args.port
        self._runner: web.AppRunner | None = None
        self._context: AbstractAsyncContextManager[Any] | None = None
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None
        self._thread_stop: asyncio.Event | None = None
        self._is_running = False

    @property
    def endpoint(self) -> str:
        """``http://host:port`` the server binds (the port is known once started if it was None)."""
        return f"http://{self._host}:{self._port}"

    @property
    def access_endpoint(self) -> str:
        """``http://access_host:port``: the URL clients use."""
        host = self.args.access_host or ("127.0.0.1" if self._host in ("0.0.0.0", "::", "") else self._host)
        return f"http://{host}:{self._port}"

    @property
    def health_url(self) -> str | None:
        """The absolute health-check URL, or None without ``healthcheck_url``."""
        path = self.args.healthcheck_url
        if not path:
            return None
        return self.access_endpoint + (path if path.startswith("/") else "/" + path)

    def is_running(self) -> bool:
        """True between a successful `start` and `stop`."""
        return self._is_running

    async def _serve(self) -> web.AppRunner:
        runner = web.AppRunner(
            self.app,
            access_log=logger if self.args.access_log else None,
            keepalive_timeout=float(self.args.timeout_keep_alive),
        )
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._port or 0)
        await site.start()
        if not self._port:
            self._port = runner.addresses[0][1]
        return runner

    async def _wait_healthy(self) -> None:
        url = self.health_url
        if url is None:
            return
        deadline = time.monotonic() + self.args.startup_timeout
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            while True:
                with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError):
                    async with session.get(url) as response:
                        if 200 <= response.status < 300:
                            return
                if time.monotonic() > deadline:
                    if self.args.kill_unhealthy_server:
                        await self.stop()
                    raise RuntimeError(f"Server at {self.endpoint} did not become healthy ({url}) in time.")
                await asyncio.sleep(_HEALTH_POLL_SECONDS)

    async def start(self) -> None:
        """Start serving (in this loop or a new thread) and wait for the health check if one is set."""
        if self._is_running:
            raise RuntimeError(f"The server at {self.endpoint} is already running; stop() it first.")
        if self.args.launch_mode == "asyncio":
            context = self.serve_context or _nothing()
            await context.__aenter__()
            try:
                self._runner = await self._serve()
            except BaseException:
                await context.__aexit__(None, None, None)
                raise
            self._context = context
        else:
            await asyncio.to_thread(self._start_thread)
        self._is_running = True
        logger.info("Server started at %s", self.endpoint)
        await self._wait_healthy()

    def _start_thread(self) -> None:
        started = threading.Event()
        failure: list[BaseException] = []

        async def main() -> None:
            self._thread_stop = asyncio.Event()
            context = self.serve_context or _nothing()
            try:
                async with context:
                    runner = await self._serve()
                    started.set()
                    try:
                        await self._thread_stop.wait()
                    finally:
                        await runner.cleanup()
            except BaseException as exc:
                failure.append(exc)
                started.set()

        def run() -> None:
            loop = self._thread_loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(main())
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="agl-server-launcher", daemon=True)
        self._thread.start()
        if not started.wait(self.args.startup_timeout):
            raise RuntimeError(f"Server thread did not start within {self.args.startup_timeout} s.")
        if failure:
            raise RuntimeError(f"Server thread failed to start: {failure[0]!r}") from failure[0]

    async def stop(self) -> None:
        """Stop serving and exit ``serve_context``; a no-op when not running."""
        if not self._is_running:
            return
        self._is_running = False
        if self.args.launch_mode == "asyncio":
            if self._runner is not None:
                await self._runner.cleanup()
                self._runner = None
            if self._context is not None:
                await self._context.__aexit__(None, None, None)
                self._context = None
        else:
            loop, stop, thread = self._thread_loop, self._thread_stop, self._thread
            if loop is not None and stop is not None:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(stop.set)
            if thread is not None:
                await asyncio.to_thread(thread.join, self.args.thread_join_timeout)
        logger.info("Server at %s stopped", self.endpoint)

    async def reload(self) -> None:
        """Stop (if running) and start again."""
        await self.stop()
        await self.start()

    async def run_forever(self) -> None:
        """Start and serve until cancelled; then stop."""
        await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()
