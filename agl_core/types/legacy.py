"""Deprecated data model of the v0.1 HTTP stack (``AgentLightningServer`` / ``AgentLightningClient``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Union

from pydantic import BaseModel, Field

import agl_core.types.status as _status
from agl_core.types.core import Rollout, TaskInput, Triplet
from agl_core.types.status import RolloutMode

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "GenericResponse",
    "RolloutLegacy",
    "RolloutRawResultLegacy",
    "Task",
    "TaskIfAny",
    "is_finished",
    "is_queuing",
    "is_running",
]


class Task(BaseModel):
    """Deprecated (v0.1): a task handed out by the legacy server; use ``Rollout``."""

    rollout_id: str
    input: TaskInput
    mode: RolloutMode | None = None
    resources_id: str | None = None
    create_time: float | None = None
    last_claim_time: float | None = None
    num_claims: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class TaskIfAny(BaseModel):
    """Deprecated (v0.1): answer of the legacy ``next task`` call; ``task`` is None when none is ready."""

    is_available: bool
    task: Task | None = None


class RolloutLegacy(BaseModel):
    """Deprecated (v0.1): a finished rollout as reported to the legacy server."""

    rollout_id: str
    task: Task | None = None
    final_reward: float | None = None
    triplets: list[Triplet] | None = None
    trace: list[dict[str, Any]] | None = None
    logs: list[str] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


RolloutRawResultLegacy = Union[  # noqa: UP007 (a string forward reference cannot use ``|``)
    None, float, list[Triplet], list[dict[str, Any]], list["ReadableSpan"], RolloutLegacy
]
"""Deprecated (v0.1): what a legacy agent's rollout method may return."""


class GenericResponse(BaseModel):
    """Deprecated (v0.1): generic acknowledgement of the legacy server."""

    status: str = "success"
    message: str | None = None
    data: dict[str, Any] | None = None


# 0.3's is_queuing/is_running/is_finished(rollout) of agentlightning.store.base (agl's status helpers in
# agl_core.types.status take a status; these take a rollout). The table in agl_core._moved03.


def is_queuing(rollout: Rollout) -> bool:
    """The rollout waits in the queue (``queuing`` or ``requeuing``)."""
    return _status.is_queuing(rollout.status)


def is_running(rollout: Rollout) -> bool:
    """A runner holds the rollout (``preparing`` or ``running``)."""
    return _status.is_running(rollout.status)


def is_finished(rollout: Rollout) -> bool:
    """The rollout ended (``failed``, ``succeeded`` or ``cancelled``)."""
    return _status.is_finished(rollout.status)
