"""Runner heartbeats: a background sender that never waits on, or blocks, the agent.

Every ``interval`` (± ``jitter``) the sender takes a system snapshot and calls
``store.update_worker(worker_id, heartbeat_stats)``; while a rollout is running it also stamps the
attempt's ``last_heartbeat_time`` (``store.update_attempt``), so an agent that runs long without emitting
spans is not taken for unresponsive, and a runner that dies stops refreshing its attempt and is caught by
the store's watchdog. Each call has its own timeout (``interval``, at least one second); a slow or failing
store only costs a logged warning.

Two modes: ``"thread"`` (a daemon thread with its own event loop; keeps beating even while a CPU-bound
agent holds the runner's loop) and ``"asyncio"`` (a task on the runner's loop). ``"thread"`` needs a
store whose ``capabilities["thread_safe"]`` is true; otherwise the sender falls back to ``"asyncio"``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from agl_core.utils.loop_thread import Ticker

if TYPE_CHECKING:
    from agl_core.store.base import LightningStore

__all__ = ["HeartbeatMode", "HeartbeatSender"]

logger = logging.getLogger(__name__)

MIN_CALL_TIMEOUT_SECONDS = 1.0
"""Shortest timeout of one snapshot or store call, however short the interval."""

HeartbeatMode = Literal["thread", "asyncio"]
"""Where heartbeats run: a daemon thread with its own loop, or a task on the runner's loop."""


class HeartbeatSender:
    """Sends worker (and current attempt) heartbeats in the background until :meth:`stop`.

    Args:
        store: Where heartbeats go.
        worker_id: The store's worker id (``"Worker-0"``).
        interval: Seconds between heartbeats (> 0); also the timeout of each call (at least 1 s).
        jitter: Up to this many seconds are added to or removed from each wait.
        mode: ``"thread"`` or ``"asyncio"`` (see the module docstring).
        snapshot: Returns the ``heartbeat_stats`` to send.
    """

    def __init__(
        self,
        store: LightningStore,
        worker_id: str,
        *,
        interval: float,
        jitter: float,
        mode: HeartbeatMode,
        snapshot: Callable[[], dict[str, Any]],
    ) -> None:
        if interval <= 0:
            raise ValueError(f"Heartbeat interval must be > 0 seconds, got {interval!r}.")
        if mode == "thread" and not store.capabilities.get("thread_safe", False):
            logger.debug(
                "Store %s is not thread-safe; heartbeats run on the runner's loop.", type(store).__name__
            )
            mode = "asyncio"
        self.store = store
        self.worker_id = worker_id
        self.interval = float(interval)
        self.call_timeout = max(self.interval, MIN_CALL_TIMEOUT_SECONDS)
        self.jitter = max(0.0, min(float(jitter), self.interval * 0.9))
        self.mode: HeartbeatMode = mode
        self._snapshot = snapshot
        self._current: tuple[str, str] | None = None
        self._ticker = Ticker(
            f"agl-heartbeat-{worker_id}", self.beat, delay=self._next_delay, on_error=self._crashed
        )
        self.beats_sent = 0
        """Heartbeats the store acknowledged."""

    def set_current(self, rollout_id: str | None, attempt_id: str | None = None) -> None:
        """Name the attempt being run (its heartbeat time is refreshed too), or None when idle."""
        self._current = None if rollout_id is None or attempt_id is None else (rollout_id, attempt_id)

    def start(self) -> None:
        """Start beating (the first heartbeat goes out at once)."""
        self._ticker.start(threaded=self.mode == "thread")

    async def stop(self) -> None:
        """Stop beating; waits (bounded) for an in-flight heartbeat to finish."""
        if not await self._ticker.stop(self.call_timeout * 3 + 1.0):
            logger.warning("Heartbeat thread of %s did not stop in time; abandoning it.", self.worker_id)

    def _next_delay(self, elapsed: float = 0.0) -> float:
        return max(0.001, self.interval + random.uniform(-self.jitter, self.jitter))

    def _crashed(self, exc: Exception) -> bool:
        logger.error("Heartbeat of %s crashed; no more heartbeats.", self.worker_id, exc_info=exc)
        return False

    async def beat(self) -> bool:
        """Send one heartbeat now; True when the store acknowledged the worker heartbeat."""
        loop = asyncio.get_running_loop()
        try:
            stats = await asyncio.wait_for(loop.run_in_executor(None, self._snapshot), self.call_timeout)
        except Exception as exc:
            logger.warning("Heartbeat of %s: system snapshot failed or timed out (%r).", self.worker_id, exc)
            stats = {"timestamp": time.time()}
        ok = True
        try:
            await asyncio.wait_for(
                self.store.update_worker(self.worker_id, heartbeat_stats=stats), self.call_timeout
            )
            self.beats_sent += 1
        except Exception as exc:
            ok = False
            logger.warning("Heartbeat of %s was not stored: %r", self.worker_id, exc)
        current = self._current
        if current is not None:
            now = getattr(self.store, "clock", time.time)()
            try:
                await asyncio.wait_for(
                    self.store.update_attempt(current[0], current[1], last_heartbeat_time=now),
                    self.call_timeout,
                )
            except Exception as exc:
                logger.debug("Attempt heartbeat of %s/%s was not stored: %r", current[0], current[1], exc)
        return ok
