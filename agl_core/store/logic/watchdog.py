"""The watchdog: which attempts have timed out or stopped answering, and how often to scan."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Literal

from agl_core.store.logic.statuses import ACTIVE_ATTEMPT_STATUSES
from agl_core.types.status import (
    AttemptStatus,
)

if TYPE_CHECKING:
    from agl_core.types import Attempt, RolloutConfig


__all__ = [
    "WATCHDOG_GUARDED_METHODS",
    "ScanDebouncer",
    "scan_unhealthy",
    "unhealthy_attempt_status",
]

WATCHDOG_GUARDED_METHODS: frozenset[str] = frozenset(
    (
        "start_rollout",
        "enqueue_rollout",
        "enqueue_many_rollouts",
        "dequeue_rollout",
        "dequeue_many_rollouts",
        "start_attempt",
        "query_rollouts",
        "get_rollout_by_id",
        "query_attempts",
        "get_latest_attempt",
        "update_resources",
        "wait_for_rollouts",
        "query_spans",
        "update_rollout",
        "update_attempt",
        "query_workers",
    )
)
"""Store methods that run a (debounced) watchdog scan first (as in Agent Lightning 0.3). Span writes,
resources
reads, `add_resources`, sequence ids, `update_worker`, `get_worker_by_id` and `statistics` do not."""


def unhealthy_attempt_status(
    attempt: Attempt, config: RolloutConfig, now: float
) -> Literal["timeout", "unresponsive"] | None:
    """``"timeout"``/``"unresponsive"`` if the watchdog must flag this active attempt, else None.

    Only ``preparing``/``running`` attempts are ever flagged.

    Timeout is measured from the attempt start (``now - start_time > timeout_seconds``); otherwise
    unresponsive from the last heartbeat, or from the start when there was none.
    """
    if attempt.status not in ACTIVE_ATTEMPT_STATUSES:
        return None
    start = attempt.start_time
    timeout = config.timeout_seconds
    if timeout is not None and now - start > timeout:
        return "timeout"
    unresponsive = config.unresponsive_seconds
    if unresponsive is not None:
        last = attempt.last_heartbeat_time
        if now - (start if last is None else last) > unresponsive:
            return "unresponsive"
    return None


def scan_unhealthy(
    attempts_with_configs: Iterable[tuple[Attempt, RolloutConfig]], now: float
) -> dict[tuple[str, str], AttemptStatus]:
    """Watchdog scan over the latest attempts of ``preparing``/``running`` rollouts.

    Returns ``{(rollout_id, attempt_id): "timeout" | "unresponsive"}`` for the attempts to flag; apply
    each through the normal attempt-update path (propagation, requeue, worker sync).
    """
    flagged: dict[tuple[str, str], AttemptStatus] = {}
    for attempt, config in attempts_with_configs:
        status = unhealthy_attempt_status(attempt, config, now)
        if status is not None:
            flagged[(attempt.rollout_id, attempt.attempt_id)] = status
    return flagged


class ScanDebouncer:
    """Allows at most one watchdog scan per `interval` seconds of `clock` (thread-safe).

    The first call is allowed at once; ``interval == 0`` allows every call.
    """

    __slots__ = ("_clock", "_interval", "_last", "_lock")

    def __init__(self, interval: float, clock: Callable[[], float]) -> None:
        self._interval = interval
        self._clock = clock
        self._last = float("-inf")
        self._lock = threading.Lock()

    def should_scan(self) -> bool:
        """True if a scan is due now; the caller that gets True must scan."""
        if self._interval <= 0:
            return True
        now = self._clock()
        if now - self._last < self._interval:
            return False
        with self._lock:
            if now - self._last < self._interval:
                return False
            self._last = now
            return True
