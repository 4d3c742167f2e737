"""Status literals for rollouts, attempts and workers, and the attempt -> rollout status mapping."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    from agl_core.types.core import RolloutConfig

__all__ = [
    "ATTEMPT_STATUSES",
    "FINISHED_ROLLOUT_STATUSES",
    "QUEUING_ROLLOUT_STATUSES",
    "ROLLOUT_STATUSES",
    "RUNNING_ROLLOUT_STATUSES",
    "TERMINAL_ATTEMPT_STATUSES",
    "AttemptStatus",
    "RolloutMode",
    "RolloutStatus",
    "WorkerStatus",
    "is_finished",
    "is_queuing",
    "is_running",
    "rollout_status_from_attempt",
]

RolloutStatus = Literal["queuing", "preparing", "running", "failed", "succeeded", "cancelled", "requeuing"]
"""Lifecycle state of a rollout; it aggregates the status of its latest attempt."""

AttemptStatus = Literal["preparing", "running", "failed", "succeeded", "unresponsive", "timeout"]
"""Lifecycle state of one attempt (one execution of a rollout by a runner)."""

RolloutMode = Literal["train", "val", "test"]
"""Which split of the data a rollout belongs to."""

WorkerStatus = Literal["idle", "busy", "unknown"]
"""Activity state of a runner worker as last seen by the store."""

ROLLOUT_STATUSES: tuple[RolloutStatus, ...] = get_args(RolloutStatus)
"""Every valid rollout status, in declaration order."""

ATTEMPT_STATUSES: tuple[AttemptStatus, ...] = get_args(AttemptStatus)
"""Every valid attempt status, in declaration order."""

QUEUING_ROLLOUT_STATUSES: frozenset[RolloutStatus] = frozenset(("queuing", "requeuing"))
"""Rollout statuses that mean "waiting in the queue for a runner"."""

RUNNING_ROLLOUT_STATUSES: frozenset[RolloutStatus] = frozenset(("preparing", "running"))
"""Rollout statuses that mean "a runner holds it"."""

FINISHED_ROLLOUT_STATUSES: frozenset[RolloutStatus] = frozenset(("failed", "succeeded", "cancelled"))
"""Rollout statuses after which no runner will pick the rollout up again."""

TERMINAL_ATTEMPT_STATUSES: frozenset[AttemptStatus] = frozenset(
    ("failed", "succeeded", "timeout", "unresponsive")
)
"""Attempt statuses that end an attempt (``unresponsive`` may still recover on a later heartbeat)."""

_PASS_THROUGH: frozenset[str] = frozenset(("preparing", "running", "succeeded"))
_RETRYABLE: frozenset[str] = frozenset(("failed", "timeout", "unresponsive"))


def is_queuing(status: RolloutStatus) -> bool:
    """Return True if the rollout is waiting in the queue (``queuing`` or ``requeuing``)."""
    return status in QUEUING_ROLLOUT_STATUSES


def is_running(status: RolloutStatus) -> bool:
    """Return True if a runner currently holds the rollout (``preparing`` or ``running``)."""
    return status in RUNNING_ROLLOUT_STATUSES


def is_finished(status: RolloutStatus) -> bool:
    """Return True if the rollout reached a final status (``failed``, ``succeeded``, ``cancelled``)."""
    return status in FINISHED_ROLLOUT_STATUSES


def rollout_status_from_attempt(
    attempt_status: AttemptStatus, attempt_sequence_id: int, config: RolloutConfig
) -> RolloutStatus:
    """Map the status of a rollout's latest attempt to the status the rollout should take.

    ``preparing``, ``running`` and ``succeeded`` carry over unchanged. ``failed``, ``timeout`` and
    ``unresponsive`` become ``requeuing`` when the status is listed in ``config.retry_condition`` and
    ``attempt_sequence_id < config.max_attempts``; otherwise the rollout is ``failed``.

    Raises:
        ValueError: if ``attempt_status`` is not a valid attempt status.
    """
    if attempt_status in _PASS_THROUGH:
        return attempt_status  # type: ignore[return-value]
    if attempt_status in _RETRYABLE:
        if attempt_status in config.retry_condition and attempt_sequence_id < config.max_attempts:
            return "requeuing"
        return "failed"
    raise ValueError(
        f"Invalid attempt status: {attempt_status} (got {attempt_status!r}). Valid attempt statuses are: "
        + ", ".join(repr(s) for s in ATTEMPT_STATUSES)
    )
