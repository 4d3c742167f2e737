"""Argument checks and defensive copies for `InMemoryLightningStore` (run before any state changes).

Each function returns the value to store or raises `InvalidRequestError` naming the argument and the
fix. Caller-owned containers (metadata dicts, configs) are copied so later changes by the caller do
not reach the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from agl_core.store._inputs import check_int_bound, check_json_value
from agl_core.store._memory_models import build
from agl_core.store.errors import InvalidRequestError
from agl_core.types import RolloutConfig

__all__ = [
    "check_limit",
    "copy_config",
    "copy_metadata",
]


def copy_metadata(name: str, value: object) -> dict[str, Any] | None:
    """A shallow copy of a metadata mapping, or None."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        check_json_value(name, value)
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


def check_limit(value: object) -> int:
    """The `limit` of `dequeue_many_rollouts`: an integer (<= 0 claims nothing)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return check_int_bound("limit", int(value))
    raise InvalidRequestError(f"limit must be an integer, got {value!r}.")
