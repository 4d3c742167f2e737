"""Futures of pending `wait_for_rollouts` calls, woken (each on its own loop) when a rollout finishes."""

from __future__ import annotations

import asyncio
import contextlib
import threading

__all__ = ["Waiters"]


class Waiters:
    """Registered waiters of one store; `wake_all` is safe from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[asyncio.Future[None], asyncio.AbstractEventLoop] = {}

    def add(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[None]) -> None:
        """Register `future` (of `loop`) to be woken."""
        with self._lock:
            self._items[future] = loop

    def discard(self, future: asyncio.Future[None]) -> None:
        """Forget `future`."""
        with self._lock:
            self._items.pop(future, None)

    def wake_all(self) -> None:
        """Resolve every registered future on its own loop."""
        with self._lock:
            items = list(self._items.items())
        for future, loop in items:
            with contextlib.suppress(RuntimeError):  # the waiter's loop is closed
                loop.call_soon_threadsafe(wake, future)


def wake(future: asyncio.Future[None]) -> None:
    """Resolve `future` unless it is done already."""
    if not future.done():
        future.set_result(None)
