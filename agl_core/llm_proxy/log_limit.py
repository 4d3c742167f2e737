"""Rate-limited logging for errors that can repeat once per request (a broken backend, a store outage).

The first few records of a kind go through in each interval; the rest are counted, and the next record
of that kind that goes through says how many were suppressed. A flood of identical failures therefore
writes a bounded number of lines (and tracebacks) instead of one per request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["LogLimiter", "log_limited"]

_MAX_KEYS = 1024


class LogLimiter:
    """Allows ``burst`` records per key in each ``interval`` seconds and counts the rest.

    Args:
        interval: Length of a window in seconds.
        burst: Records of one key let through per window.
        clock: Monotonic time source (tests pass their own).
    """

    def __init__(
        self, interval: float = 60.0, burst: int = 3, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if interval <= 0 or burst < 1:
            raise ValueError(f"interval must be > 0 and burst >= 1, got {interval} and {burst}")
        self.interval = interval
        self.burst = burst
        self._clock = clock
        self._state: dict[Hashable, list[float | int]] = {}  # key -> [window start, let through, suppressed]

    def allow(self, key: Hashable) -> int | None:
        """None when a record of ``key`` should be dropped; else how many were dropped since the last one."""
        now = self._clock()
        state = self._state.get(key)
        if state is None or now - state[0] >= self.interval:
            suppressed = int(state[2]) if state is not None else 0
            if state is None and len(self._state) >= _MAX_KEYS:
                self._state.clear()
            self._state[key] = [now, 1, 0]
            return suppressed
        if state[1] < self.burst:
            state[1] += 1
            suppressed, state[2] = int(state[2]), 0
            return suppressed
        state[2] += 1
        return None


LIMITER = LogLimiter()
"""The proxy's shared limiter."""


def log_limited(
    logger: logging.Logger, level: int, key: Hashable, message: str, *args: Any, exc_info: bool = False
) -> None:
    """Log through :data:`LIMITER`: dropped when ``key`` is over its budget, else with the dropped count."""
    suppressed = LIMITER.allow(key)
    if suppressed is None:
        return
    if suppressed:
        message += " (%d similar message(s) suppressed)"
        args = (*args, suppressed)
    logger.log(level, message, *args, exc_info=exc_info)
