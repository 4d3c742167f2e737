"""Compatibility module for Agent Lightning 0.3's ``agentlightning.store.utils`` (status rules, watchdog).

The functions keep 0.3's signatures (coroutines taking models) and call agl's implementations in
:mod:`agl_core.types.status` and :mod:`agl_core.store.logic`. Listed in
docs/migrating-from-agent-lightning.md.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

from agl_core.store.logic import scan_unhealthy
from agl_core.types import Attempt, AttemptedRollout, AttemptStatus, Rollout, RolloutConfig, RolloutStatus
from agl_core.types.status import rollout_status_from_attempt as _rollout_status

__all__ = [
    "LATENCY_BUCKETS",
    "UpdateAttemptStatus",
    "UpdateRolloutStatus",
    "rollout_status_from_attempt",
    "scan_unhealthy_rollouts",
]

UpdateRolloutStatus = Callable[[str, RolloutStatus], Awaitable[Rollout]]
"""``(rollout_id, status) -> Rollout`` coroutine."""

UpdateAttemptStatus = Callable[[str, str, AttemptStatus], Awaitable[Attempt]]
"""``(rollout_id, attempt_id, status) -> Attempt`` coroutine."""

LATENCY_BUCKETS: list[float] = [
    *(1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4),
    *(0.001, 0.002, 0.003, 0.005, 0.007, 0.01, 0.015, 0.02, 0.03, 0.05, 0.07),
    *(0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 12.0, 15.0, 20.0, 25.0, 30.0),
    *(40.0, 50.0, 60.0, 90.0, 120.0, 180.0, 240.0, 300.0),
]
"""Latency histogram buckets in seconds, from 1 microsecond to 300 s."""


async def rollout_status_from_attempt(attempt: Attempt, config: RolloutConfig) -> RolloutStatus:
    """The status a rollout takes from its latest ``attempt`` (see ``agl_core.types.status``)."""
    return _rollout_status(attempt.status, attempt.sequence_id, config)


async def scan_unhealthy_rollouts(
    rollouts: Sequence[AttemptedRollout],
) -> dict[tuple[str, str], AttemptStatus]:
    """``{(rollout_id, attempt_id): "timeout" | "unresponsive"}`` for the rollouts' latest attempts, now."""
    return scan_unhealthy(((r.attempt, r.config) for r in rollouts), time.time())
