"""A manually driven clock for tests of time-dependent store behaviour (watchdog, timestamps)."""

from __future__ import annotations

import threading

__all__ = ["FakeClock"]


class FakeClock:
    """A clock that only moves when told to: pass it as a store's ``clock`` and call `advance`.

    Calling the instance returns the current fake time in seconds since the epoch. It is safe to read
    and move from several threads. Time never goes backwards through `advance`; `set` may move it
    anywhere (to model a clock jump).
    """

    DEFAULT_START: float = 1_700_000_000.0
    """Where a clock starts by default: a realistic epoch timestamp (November 2023)."""

    def __init__(self, start: float = DEFAULT_START) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        """The current fake time."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move the clock forward by ``seconds`` (>= 0) and return the new time."""
        if seconds < 0:
            raise ValueError(
                f"FakeClock.advance() needs seconds >= 0, got {seconds!r}; use set() to go back."
            )
        with self._lock:
            self._now += float(seconds)
            return self._now

    def set(self, now: float) -> None:
        """Jump to the absolute time ``now``."""
        with self._lock:
            self._now = float(now)

    def __repr__(self) -> str:
        return f"FakeClock({self():.3f})"
