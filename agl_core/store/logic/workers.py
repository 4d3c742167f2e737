"""Worker bookkeeping: how attempt writes, dequeues and heartbeats change a worker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agl_core.store.errors import (
    InvalidArgumentTypeError,
)
from agl_core.store.logic.checks import check_json_value
from agl_core.types import Worker
from agl_core.types.unset import UNSET

if TYPE_CHECKING:
    pass


__all__ = [
    "apply_worker_updates",
    "worker_sync_required",
    "worker_updates_for_attempt",
    "worker_updates_for_empty_dequeue",
    "worker_updates_for_heartbeat",
]

_IDLE_ATTEMPT: frozenset[str] = frozenset(("succeeded", "failed"))
_LOST_ATTEMPT: frozenset[str] = frozenset(("timeout", "unresponsive"))


def worker_sync_required(worker_id: object, status: object, attempt_worker_id: str | None) -> bool:
    """Whether an `update_attempt(worker_id=..., status=...)` call must update a worker.

    True when a non-empty `worker_id` is given, or a status is given and the attempt has a worker.
    Pass `UNSET` for arguments that were not given.
    """
    if worker_id is not UNSET and worker_id:
        return True
    return status is not UNSET and bool(attempt_worker_id)


def worker_updates_for_attempt(
    attempt_status: str, rollout_id: str, attempt_id: str, now: float, *, dequeue: bool = False
) -> dict[str, Any]:
    """Worker fields to write after an attempt write carrying that worker.

    ``succeeded``/``failed`` -> ``idle``; ``timeout``/``unresponsive`` -> ``unknown`` (both stamp
    ``last_idle_time`` and clear the current ids); anything else -> ``busy`` with the current ids and
    ``last_busy_time``. `dequeue` also stamps ``last_dequeue_time``.
    """
    if attempt_status in _IDLE_ATTEMPT or attempt_status in _LOST_ATTEMPT:
        updates: dict[str, Any] = {
            "status": "idle" if attempt_status in _IDLE_ATTEMPT else "unknown",
            "last_idle_time": now,
            "current_rollout_id": None,
            "current_attempt_id": None,
        }
    else:
        updates = {
            "status": "busy",
            "last_busy_time": now,
            "current_rollout_id": rollout_id,
            "current_attempt_id": attempt_id,
        }
    if dequeue:
        updates["last_dequeue_time"] = now
    return updates


def worker_updates_for_empty_dequeue(current_status: str | None, now: float) -> dict[str, Any]:
    """Worker fields to write when its dequeue found nothing (`current_status` None: new worker).

    The worker becomes ``idle`` (stamping ``last_idle_time``) unless it already is; ``last_dequeue_time``
    is always stamped.
    """
    if current_status == "idle":
        return {"last_dequeue_time": now}
    return {"status": "idle", "last_idle_time": now, "last_dequeue_time": now}


def worker_updates_for_heartbeat(now: float, heartbeat_stats: object) -> dict[str, Any]:
    """Worker fields for `update_worker`: ``last_heartbeat_time`` and, unless `UNSET`, a copy of the stats."""
    updates: dict[str, Any] = {"last_heartbeat_time": now}
    if heartbeat_stats is UNSET:
        return updates
    if not isinstance(heartbeat_stats, Mapping):
        raise InvalidArgumentTypeError(
            f"heartbeat_stats must be a dict, got {type(heartbeat_stats).__name__}; "
            "omit it to keep the old stats."
        )
    check_json_value("heartbeat_stats", heartbeat_stats)
    updates["heartbeat_stats"] = dict(heartbeat_stats)
    return updates


def apply_worker_updates(worker: Worker | None, worker_id: str, updates: Mapping[str, Any]) -> Worker:
    """Upsert: a new `Worker` (status ``unknown`` unless updated) or a copy of `worker` with `updates`."""
    if worker is None:
        return Worker(worker_id=worker_id, **updates)
    return worker.model_copy(update=updates)
