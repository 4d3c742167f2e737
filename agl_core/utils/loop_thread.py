"""Event loops on threads: `LoopThread` serves coroutines to synchronous callers, `Ticker` repeats one.

`LoopThread` is the one way agl serves something asynchronous from a synchronous caller (the store's
`BackgroundServer`, `LLMProxy.start_in_thread`, `FakeOpenAIServer` as a context manager)::

    thread = LoopThread("agl-thing")
    thread.start(server.start)      # returns once server.start() finished on the loop
    thread.call(server.flush)       # run a coroutine there, from this thread
    thread.stop(server.stop)        # server.stop() on the loop, then the loop ends and the thread joins

`Ticker` is the one way agl repeats a coroutine in the background (runner heartbeats, the trainer's
progress view): on a daemon thread with a private event loop, or as a task on the caller's loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread", "Ticker", "new_event_loop"]

T = TypeVar("T")

CoroutineFunction = Callable[[], Coroutine[Any, Any, T]]


def new_event_loop(*, prefer_uvloop: bool = False) -> asyncio.AbstractEventLoop:
    """A fresh event loop; uvloop's when ``prefer_uvloop`` and uvloop is installed."""
    if prefer_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
            return loop
    return asyncio.new_event_loop()


class LoopThread:
    """An event loop that runs forever on a daemon thread until :meth:`stop`.

    Args:
        name: the thread's name (shows in stack dumps).
        timeout: seconds :meth:`start`, :meth:`call` and :meth:`stop` wait by default.
        prefer_uvloop: run uvloop's loop when uvloop is installed.
    """

    def __init__(self, name: str, *, timeout: float = 30.0, prefer_uvloop: bool = False) -> None:
        self.name = name
        self.timeout = timeout
        self._prefer_uvloop = prefer_uvloop
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Whether the thread was started and not stopped yet."""
        return self._thread is not None

    def start(self, setup: CoroutineFunction[T] | None = None, *, timeout: float | None = None) -> T | None:
        """Start the thread and its loop, then run ``setup()`` there and return its result.

        When ``setup`` raises (or does not finish within ``timeout``), the loop is stopped, the thread
        joined, and the error raised here.

        Raises:
            RuntimeError: the thread is already running.
            TimeoutError: ``setup`` took longer than ``timeout``.
        """
        if self._thread is not None:
            raise RuntimeError(f"{self.name} is already running; stop it first.")
        loop = new_event_loop(prefer_uvloop=self._prefer_uvloop)
        ready = threading.Event()
        self.loop = loop
        self._thread = threading.Thread(target=self._run, args=(loop, ready), name=self.name, daemon=True)
        self._thread.start()
        if not ready.wait(self.timeout if timeout is None else timeout):
            self.stop(timeout=0)
            raise TimeoutError(f"{self.name}: the event loop did not start.")
        if setup is None:
            return None
        try:
            return self.call(setup, timeout=timeout)
        except BaseException:
            self.stop()
            raise

    def _run(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()

    def call(self, fn: CoroutineFunction[T], *, timeout: float | None = None) -> T:
        """Run ``fn()`` on the loop from another thread and return its result.

        Raises:
            RuntimeError: the thread is not running.
            TimeoutError: no result within ``timeout`` (default: the thread's timeout).
        """
        loop = self.loop
        if loop is None or self._thread is None:
            raise RuntimeError(f"{self.name} is not running; call start() first.")
        wait = self.timeout if timeout is None else timeout
        future = asyncio.run_coroutine_threadsafe(fn(), loop)
        try:
            return future.result(wait)
        except concurrent.futures.TimeoutError:  # not the built-in TimeoutError before Python 3.11
            future.cancel()
            raise TimeoutError(f"{self.name}: no result within {wait:g}s.") from None

    def stop(self, teardown: CoroutineFunction[Any] | None = None, *, timeout: float | None = None) -> None:
        """Run ``teardown()`` on the loop (when given), stop the loop and join the thread (idempotent).

        The loop stops and the thread is joined even when ``teardown`` raises; the error is raised after.
        """
        thread, loop = self._thread, self.loop
        if thread is None or loop is None:
            return
        wait = self.timeout if timeout is None else timeout
        try:
            if teardown is not None and loop.is_running():
                self.call(teardown, timeout=wait)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(wait)
            self._thread = None


class Ticker:
    """Runs ``tick()`` again and again until :meth:`stop`, waiting ``delay(elapsed)`` seconds in between.

    ``elapsed`` is how long the tick took; the first tick runs at once. A tick that raises an `Exception`
    is given to ``on_error``; when that returns False the ticker ends.

    Args:
        name: the thread's name in threaded mode.
        tick: the coroutine function to repeat.
        delay: seconds to wait after a tick, given how long it took.
        on_error: what to do with a failed tick; True keeps ticking.
    """

    def __init__(
        self,
        name: str,
        tick: Callable[[], Awaitable[Any]],
        *,
        delay: Callable[[float], float],
        on_error: Callable[[Exception], bool],
    ) -> None:
        self.name = name
        self._tick = tick
        self._delay = delay
        self._on_error = on_error
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """Whether the ticker was started and not stopped yet."""
        return self._thread is not None or self._task is not None

    def start(self, *, threaded: bool) -> None:
        """Start ticking: on a daemon thread with its own event loop, or as a task on the running loop.

        A second start while running does nothing.
        """
        if self.running:
            return
        self._stop.clear()
        if threaded:
            self._thread = threading.Thread(target=self._thread_main, name=self.name, daemon=True)
            self._thread.start()
        else:
            self._task = asyncio.get_running_loop().create_task(self._task_main())

    async def stop(self, join_timeout: float) -> bool:
        """Stop ticking: cancel the task, or let the thread end its tick (waiting at most ``join_timeout``).

        Returns False when the thread was still running after ``join_timeout`` (it is abandoned).
        """
        self._stop.set()
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._thread is not None:
            thread, self._thread = self._thread, None
            await asyncio.to_thread(thread.join, join_timeout)
            return not thread.is_alive()
        return True

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            wait = 0.0
            while not self._stop.wait(wait):
                began = time.monotonic()
                try:
                    loop.run_until_complete(self._tick())
                except Exception as exc:
                    if not self._on_error(exc):
                        return
                wait = self._delay(time.monotonic() - began)
        finally:
            try:
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()

    async def _task_main(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                await self._tick()
            except Exception as exc:
                if not self._on_error(exc):
                    return
            await asyncio.sleep(self._delay(time.monotonic() - began))
