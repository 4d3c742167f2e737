"""Event-driven waiting for rollouts to finish, across threads and event loops.

One implementation for every backend. A waiter belongs to the event loop that awaits it and holds an
`asyncio.Future` of that loop; waking goes through `loop.call_soon_threadsafe`, so a rollout finished
on any thread wakes waiters on any loop. A backend that knows which rollout finished (the in-memory
store) calls `WaiterRegistry.rollout_finished`; one that only knows that *some* rollout finished (a
database shared with other processes) calls `wake_all` and lets `poll_finished_rollouts` re-read.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from agl_core.types.status import FINISHED_ROLLOUT_STATUSES

if TYPE_CHECKING:
    from agl_core.types import Rollout

__all__ = [
    "POLL_MAX_SECONDS",
    "POLL_START_SECONDS",
    "RolloutWaiter",
    "WaiterRegistry",
    "poll_finished_rollouts",
]

POLL_START_SECONDS = 0.05
"""First pause of `poll_finished_rollouts` between two reads."""
POLL_MAX_SECONDS = 0.5
"""Longest pause of `poll_finished_rollouts` (the pause doubles from `POLL_START_SECONDS`)."""


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class RolloutWaiter:
    """One `wait_for_rollouts` call waiting for a set of rollouts; `future` resolves when all finished."""

    __slots__ = ("future", "loop", "remaining", "rollout_ids")

    def __init__(self, loop: asyncio.AbstractEventLoop, rollout_ids: tuple[str, ...]) -> None:
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        self.rollout_ids = rollout_ids
        self.remaining = len(rollout_ids)

    def wake(self) -> None:
        """Resolve the future from any thread (a no-op if the loop is already closed)."""
        with contextlib.suppress(RuntimeError):  # a closed loop has nobody left to wake
            self.loop.call_soon_threadsafe(_resolve, self.future)


class WaiterRegistry:
    """Waiters by the rollout ids they still wait for; every method is safe from any thread."""

    __slots__ = ("_by_rollout", "_lock")

    def __init__(self) -> None:
        self._by_rollout: dict[str, set[RolloutWaiter]] = {}
        self._lock = threading.Lock()

    def register(self, loop: asyncio.AbstractEventLoop, rollout_ids: Iterable[str]) -> RolloutWaiter:
        """A waiter on `loop` for the distinct `rollout_ids` (register before reading their statuses)."""
        waiter = RolloutWaiter(loop, tuple(dict.fromkeys(rollout_ids)))
        with self._lock:
            by_rollout = self._by_rollout
            for rollout_id in waiter.rollout_ids:
                waiters = by_rollout.get(rollout_id)
                if waiters is None:
                    by_rollout[rollout_id] = {waiter}
                else:
                    waiters.add(waiter)
        return waiter

    def unregister(self, waiter: RolloutWaiter) -> None:
        """Forget `waiter` (after it woke, timed out or was cancelled). Idempotent."""
        with self._lock:
            by_rollout = self._by_rollout
            for rollout_id in waiter.rollout_ids:
                waiters = by_rollout.get(rollout_id)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        del by_rollout[rollout_id]

    def rollout_finished(self, rollout_id: str) -> None:
        """Count `rollout_id` as finished for its waiters; wake those with nothing left to wait for."""
        if not self._by_rollout:  # the common case: nobody waits
            return
        with self._lock:
            waiters = self._by_rollout.pop(rollout_id, None)
            if waiters is None:
                return
            for waiter in waiters:
                waiter.remaining -= 1
                if waiter.remaining <= 0:
                    waiter.wake()

    def wake_all(self) -> None:
        """Wake every waiter (some rollout finished, or the store is closing); each re-checks."""
        with self._lock:
            waiters = {w for group in self._by_rollout.values() for w in group}
            self._by_rollout.clear()
        for waiter in waiters:
            waiter.wake()

    def waiting_on(self, rollout_id: str) -> int:
        """Number of waiters still waiting for `rollout_id`."""
        return len(self._by_rollout.get(rollout_id, ()))

    def __len__(self) -> int:
        """Number of rollout ids someone waits for."""
        return len(self._by_rollout)


async def poll_finished_rollouts(
    waiters: WaiterRegistry,
    rollout_ids: Sequence[str],
    timeout: float | None,
    read: Callable[[Sequence[str]], Awaitable[Mapping[str, Rollout]]],
    *,
    before_pause: Callable[[], Awaitable[None]] | None = None,
) -> list[Rollout]:
    """`wait_for_rollouts` of a store whose rollouts other processes may also finish.

    Reads the rollouts with `read` (id -> rollout, unknown ids left out) until every known one is
    finished or `timeout` (real seconds; None: no deadline) passes, pausing between reads for
    `POLL_START_SECONDS` doubling to `POLL_MAX_SECONDS`, or less when `waiters` is woken (a call of
    this store finished a rollout). `before_pause` runs before each pause (e.g. to raise once the store
    is closed). Returns the finished rollouts in the order of `rollout_ids`.
    """
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    interval = POLL_START_SECONDS
    while True:
        waiter = waiters.register(loop, rollout_ids)  # registered before reading: no finish is missed
        try:
            found = await read(rollout_ids)
            finished = {rid: r for rid, r in found.items() if r.status in FINISHED_ROLLOUT_STATUSES}
            remaining = None if deadline is None else deadline - loop.time()
            if len(finished) == len(found) or (remaining is not None and remaining <= 0):
                return [finished[rid] for rid in rollout_ids if rid in finished]
            if before_pause is not None:
                await before_pause()
            pause = interval if remaining is None else min(interval, remaining)
            handle = loop.call_later(pause, _resolve, waiter.future)
            try:
                await waiter.future
            finally:
                handle.cancel()
        finally:
            waiters.unregister(waiter)
        interval = min(interval * 2, POLL_MAX_SECONDS)
