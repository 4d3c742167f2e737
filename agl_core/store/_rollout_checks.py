"""Agent Lightning 0.3's ``is_queuing/is_running/is_finished(rollout)`` of ``agentlightning.store.base``
(compatibility; agl's status helpers in ``agl_core.types.status`` take a status, these take a rollout)."""

from __future__ import annotations

from agl_core.types import Rollout
from agl_core.types import status as _status

__all__ = ["is_finished", "is_queuing", "is_running"]


def is_queuing(rollout: Rollout) -> bool:
    """The rollout waits in the queue (``queuing`` or ``requeuing``)."""
    return _status.is_queuing(rollout.status)


def is_running(rollout: Rollout) -> bool:
    """A runner holds the rollout (``preparing`` or ``running``)."""
    return _status.is_running(rollout.status)


def is_finished(rollout: Rollout) -> bool:
    """The rollout ended (``failed``, ``succeeded`` or ``cancelled``)."""
    return _status.is_finished(rollout.status)
