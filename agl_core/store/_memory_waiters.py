"""Event-driven waiting for rollouts to finish, across threads and event loops.

A waiter belongs to the event loop that awaits it and holds an `asyncio.Future` of that loop. The
store calls `WaiterRegistry` methods while holding its own lock (the registry is not locked itself);
finishing a rollout resolves the future of every waiter whose last pending rollout it was, through
`loop.call_soon_threadsafe`, so a rollout finished on any thread wakes waiters on any loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

__all__ = ["RolloutWaiter", "WaiterRegistry"]


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
    """Waiters by the rollout ids they still wait for. Callers serialize access (the store's lock)."""

    __slots__ = ("_by_rollout",)

    def __init__(self) -> None:
        self._by_rollout: dict[str, set[RolloutWaiter]] = {}

    def register(self, loop: asyncio.AbstractEventLoop, rollout_ids: Iterable[str]) -> RolloutWaiter:
        """A waiter on `loop` for the distinct, currently unfinished `rollout_ids`."""
        waiter = RolloutWaiter(loop, tuple(dict.fromkeys(rollout_ids)))
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
        by_rollout = self._by_rollout
        for rollout_id in waiter.rollout_ids:
            waiters = by_rollout.get(rollout_id)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del by_rollout[rollout_id]

    def rollout_finished(self, rollout_id: str) -> None:
        """Count `rollout_id` as finished for its waiters; wake those with nothing left to wait for."""
        if not self._by_rollout:
            return
        waiters = self._by_rollout.pop(rollout_id, None)
        if waiters is None:
            return
        for waiter in waiters:
            waiter.remaining -= 1
            if waiter.remaining <= 0:
                waiter.wake()

    def wake_all(self) -> None:
        """Wake every waiter (the store is closing); each re-checks and raises or returns."""
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
