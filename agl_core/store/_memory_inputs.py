"""Argument checks and defensive copies for `InMemoryLightningStore` (run before any state changes).

Each function returns the value to store or raises `InvalidRequestError` naming the argument and the
fix. Caller-owned containers (metadata dicts, configs) are copied so later changes by the caller do
not reach the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from agl_core.store._memory_models import build
from agl_core.store.errors import InvalidRequestError
from agl_core.types import EnqueueRolloutRequest, RolloutConfig

__all__ = [
    "check_limit",
    "check_optional_number",
    "check_optional_str",
    "check_rollout_id_list",
    "check_timeout",
    "copy_config",
    "copy_metadata",
    "enqueue_requests",
]


def check_optional_str(name: str, value: object) -> str | None:
    """`value` if it is a string or None."""
    if value is None or isinstance(value, str):
        return value
    raise InvalidRequestError(f"{name} must be a string or None, got {type(value).__name__} {value!r}.")


def check_optional_number(name: str, value: object) -> float | None:
    """`value` if it is an int/float (not bool) or None."""
    if value is None or value.__class__ is float or value.__class__ is int:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise InvalidRequestError(
        f"{name} must be a number of seconds since the epoch or None, got {type(value).__name__} {value!r}."
    )


def copy_metadata(name: str, value: object) -> dict[str, Any] | None:
    """A shallow copy of a metadata mapping, or None."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return dict(value)
    raise InvalidRequestError(f"{name} must be a dict or None, got {type(value).__name__} {value!r}.")


def copy_config(config: object) -> RolloutConfig:
    """A private `RolloutConfig`: a fresh default for None, a copy of an instance, or a validated mapping."""
    if config is None:
        return build(
            RolloutConfig,
            {"timeout_seconds": None, "unresponsive_seconds": None, "max_attempts": 1, "retry_condition": []},
        )
    if isinstance(config, RolloutConfig):
        return build(
            RolloutConfig,
            {
                "timeout_seconds": config.timeout_seconds,
                "unresponsive_seconds": config.unresponsive_seconds,
                "max_attempts": config.max_attempts,
                "retry_condition": list(config.retry_condition),
            },
        )
    if isinstance(config, Mapping):
        try:
            return RolloutConfig.model_validate(config)
        except ValidationError as exc:
            raise InvalidRequestError(f"Invalid rollout config {dict(config)!r}: {exc}") from None
    raise InvalidRequestError(
        f"config must be a RolloutConfig (or a dict of its fields), got {type(config).__name__} {config!r}."
    )


def enqueue_requests(requests: object) -> list[EnqueueRolloutRequest]:
    """Validate the argument of `enqueue_many_rollouts`: a sequence of requests (or dicts of their fields)."""
    if isinstance(requests, (str, bytes, Mapping)) or not isinstance(requests, Sequence):
        raise InvalidRequestError(
            f"enqueue_many_rollouts expects a list of EnqueueRolloutRequest, got {type(requests).__name__}."
        )
    result: list[EnqueueRolloutRequest] = []
    for index, request in enumerate(requests):
        if isinstance(request, EnqueueRolloutRequest):
            result.append(request)
        elif isinstance(request, Mapping):
            try:
                result.append(EnqueueRolloutRequest.model_validate(request))
            except ValidationError as exc:
                raise InvalidRequestError(f"Invalid enqueue request at index {index}: {exc}") from None
        else:
            raise InvalidRequestError(
                f"Item {index} of enqueue_many_rollouts is a {type(request).__name__}; "
                "pass EnqueueRolloutRequest(input=...) objects."
            )
    return result


def check_rollout_id_list(value: object) -> list[str]:
    """The `rollout_ids` of `wait_for_rollouts`: a list (not a string) of string ids."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, set, frozenset)):
        raise InvalidRequestError(
            "rollout_ids must be a list of rollout ids, e.g. ['ro-...'], "
            f"not {type(value).__name__} {value!r}."
        )
    ids = list(value)
    for rollout_id in ids:
        if not isinstance(rollout_id, str):
            raise InvalidRequestError(f"rollout_ids must contain strings, got {rollout_id!r}.")
    return ids


def check_timeout(value: object) -> float | None:
    """The `timeout` of `wait_for_rollouts`: None (wait forever) or a number of seconds."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise InvalidRequestError(f"timeout must be a number of seconds or None, got {value!r}.")


def check_limit(value: object) -> int:
    """The `limit` of `dequeue_many_rollouts`: an integer (<= 0 claims nothing)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    raise InvalidRequestError(f"limit must be an integer, got {value!r}.")
