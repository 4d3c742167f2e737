"""Status rules: propagation from attempts to rollouts, end times, requeueing and heartbeats."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agl_core.store.errors import (
    InvalidStatusError,
)
from agl_core.types.status import (
    ATTEMPT_STATUSES,
    FINISHED_ROLLOUT_STATUSES,
    QUEUING_ROLLOUT_STATUSES,
    TERMINAL_ATTEMPT_STATUSES,
    AttemptStatus,
    RolloutStatus,
    rollout_status_from_attempt,
)

if TYPE_CHECKING:
    from agl_core.types import Attempt, Rollout, RolloutConfig


__all__ = [
    "ACTIVE_ATTEMPT_STATUSES",
    "attempt_end_time_for",
    "heartbeat_transition",
    "next_rollout_status",
    "next_rollout_status_after_attempt_update",
    "rollout_end_time_for",
    "should_enqueue",
]

_ATTEMPT_STATUSES: frozenset[str] = frozenset(ATTEMPT_STATUSES)


def should_enqueue(rollout_status: str) -> bool:
    """True if writing `rollout_status` must put the rollout in the queue (``queuing``/``requeuing``)."""
    return rollout_status in QUEUING_ROLLOUT_STATUSES


def rollout_end_time_for(status: str, now: float) -> float | None:
    """``Rollout.end_time`` after writing `status`: `now` for finished statuses, else None."""
    return now if status in FINISHED_ROLLOUT_STATUSES else None


def attempt_end_time_for(status: str, now: float) -> float | None:
    """``Attempt.end_time`` after writing `status`: `now` for every terminal status (quirk 7 in
    docs/migrating-from-agent-lightning.md fixed).

    Terminal: failed, succeeded, timeout, unresponsive. ``preparing``/``running`` give None.
    """
    return now if status in TERMINAL_ATTEMPT_STATUSES else None


def next_rollout_status_after_attempt_update(
    rollout: Rollout, attempt: Attempt, new_attempt_status: str, *, is_latest: bool
) -> RolloutStatus | None:
    """The rollout status implied by setting `attempt` to `new_attempt_status`, or None if unchanged.

    Only the latest attempt propagates, and a finished rollout (failed/succeeded/cancelled) never
    changes this way (quirk 7 fixed: only `update_rollout` changes it). Otherwise the status is
    `rollout_status_from_attempt(new_attempt_status, attempt.sequence_id, rollout.config)`.

    Raises:
        InvalidStatusError: `new_attempt_status` is not an attempt status.
    """
    return next_rollout_status(
        rollout.status, rollout.config, attempt.sequence_id, new_attempt_status, is_latest=is_latest
    )


def next_rollout_status(
    rollout_status: str,
    config: RolloutConfig,
    attempt_sequence_id: int,
    new_attempt_status: str,
    *,
    is_latest: bool,
) -> RolloutStatus | None:
    """`next_rollout_status_after_attempt_update` from plain values (for stores that keep rows).

    Raises:
        InvalidStatusError: `new_attempt_status` is not an attempt status.
    """
    if new_attempt_status.__class__ is not str or new_attempt_status not in _ATTEMPT_STATUSES:
        raise InvalidStatusError("attempt", new_attempt_status, ATTEMPT_STATUSES)
    if not is_latest or rollout_status in FINISHED_ROLLOUT_STATUSES:
        return None
    status = rollout_status_from_attempt(new_attempt_status, attempt_sequence_id, config)  # type: ignore[arg-type]
    return None if status == rollout_status else status


ACTIVE_ATTEMPT_STATUSES: frozenset[str] = frozenset(("preparing", "running"))
_HEARTBEAT_REVIVES: frozenset[str] = frozenset(("preparing", "unresponsive"))
_SPAN_MOVES_ROLLOUT: frozenset[str] = frozenset(("queuing", "requeuing", "preparing"))


def heartbeat_transition(
    rollout_status: str, attempt_status: str, *, is_latest: bool
) -> tuple[AttemptStatus, RolloutStatus | None]:
    """Statuses after a span (heartbeat) arrives for an attempt: ``(attempt_status, rollout_status or None)``.

    The attempt goes ``preparing``/``unresponsive`` -> ``running``; ``running``, ``failed``,
    ``succeeded`` and ``timeout`` stay. If the attempt is the latest and is now ``running``, a
    ``queuing``, ``requeuing`` or ``preparing`` rollout becomes ``running`` (quirk 6 "queueing"
    fixed); finished rollouts never move.
    The caller always refreshes ``last_heartbeat_time``.
    """
    new_attempt = "running" if attempt_status in _HEARTBEAT_REVIVES else attempt_status
    if is_latest and new_attempt == "running" and rollout_status in _SPAN_MOVES_ROLLOUT:
        return new_attempt, "running"  # type: ignore[return-value]
    return new_attempt, None  # type: ignore[return-value]
