"""Encoding between agl models and `SqliteLightningStore` rows.

Nested values are stored as JSON text (pydantic-core's Rust encoder and decoder; NaN and infinities
are kept). Rows become models with ``model_construct`` (no re-validation: the store only reads what it
wrote after validating it). Configs, resources and spans, whose nested models have custom validators
and extra fields, go through pydantic's JSON validation instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import from_json

from agl_core.store.errors import InvalidRequestError
from agl_core.store.logic.encoding import NAMED_RESOURCES, json_text, metadata_json_text, resources_json_text
from agl_core.types import (
    Attempt,
    AttemptedRollout,
    ResourcesUpdate,
    Rollout,
    RolloutConfig,
    Worker,
)

__all__ = [
    "ATTEMPT_COLUMNS",
    "ATTEMPT_COLUMNS_A",
    "NAMED_RESOURCES",
    "RESOURCES_COLUMNS",
    "ROLLOUT_COLUMNS",
    "ROLLOUT_COLUMNS_R",
    "WORKER_COLUMNS",
    "ConfigColumns",
    "attempt_from_row",
    "attempt_values",
    "config_columns",
    "config_from_json",
    "construct",
    "dump_json",
    "dump_resources",
    "metadata_json",
    "resources_from_row",
    "rollout_from_row",
    "worker_from_row",
]

M = TypeVar("M", bound=BaseModel)

ROLLOUT_COLUMNS = "rollout_id, input, start_time, end_time, mode, resources_id, status, config, metadata"
"""Column list that `rollout_from_row` reads."""
ROLLOUT_COLUMNS_R = ", ".join("r." + c.strip() for c in ROLLOUT_COLUMNS.split(","))
"""`ROLLOUT_COLUMNS` of the table alias ``r``."""
ATTEMPT_COLUMNS = (
    "rollout_id, attempt_id, sequence_id, start_time, end_time, status, worker_id, "
    "last_heartbeat_time, metadata"
)
"""Column list that `attempt_from_row` reads."""
ATTEMPT_COLUMNS_A = ", ".join("a." + c.strip() for c in ATTEMPT_COLUMNS.split(","))
"""`ATTEMPT_COLUMNS` of the table alias ``a``."""
WORKER_COLUMNS = (
    "worker_id, status, heartbeat_stats, last_heartbeat_time, last_dequeue_time, last_busy_time, "
    "last_idle_time, current_rollout_id, current_attempt_id"
)
"""Column list that `worker_from_row` reads."""
RESOURCES_COLUMNS = "resources_id, create_time, update_time, version, resources"
"""Column list that `resources_from_row` reads."""

"""Validates and dumps `NamedResources` (a dict of registered resource types)."""


# ---------------------------------------------------------------------------------------------- models


def construct(cls: type[M], values: dict[str, Any]) -> M:
    """A `cls` instance holding `values` (every field, already valid) without validation."""
    return cls.model_construct(**values)


def config_from_json(text: str) -> RolloutConfig:
    """A `RolloutConfig` from its stored JSON."""
    return RolloutConfig.model_validate_json(text)


def rollout_from_row(row: Sequence[Any], attempt: Attempt | None = None) -> Rollout:
    """A `Rollout` (an `AttemptedRollout` when `attempt` is given) from `ROLLOUT_COLUMNS` values."""
    metadata = row[8]
    values = {
        "rollout_id": row[0],
        "input": from_json(row[1]),
        "start_time": row[2],
        "end_time": row[3],
        "mode": row[4],
        "resources_id": row[5],
        "status": row[6],
        "config": config_from_json(row[7]),
        "metadata": None if metadata is None else from_json(metadata),
    }
    if attempt is None:
        return construct(Rollout, values)
    values["attempt"] = attempt
    return construct(AttemptedRollout, values)


def attempt_values(row: Sequence[Any], offset: int = 0) -> dict[str, Any]:
    """The field values of an `Attempt` from `ATTEMPT_COLUMNS` values starting at `offset` in `row`."""
    metadata = row[offset + 8]
    return {
        "rollout_id": row[offset],
        "attempt_id": row[offset + 1],
        "sequence_id": row[offset + 2],
        "start_time": row[offset + 3],
        "end_time": row[offset + 4],
        "status": row[offset + 5],
        "worker_id": row[offset + 6],
        "last_heartbeat_time": row[offset + 7],
        "metadata": None if metadata is None else from_json(metadata),
    }


def attempt_from_row(row: Sequence[Any], offset: int = 0) -> Attempt:
    """An `Attempt` from `ATTEMPT_COLUMNS` values starting at `offset` in `row`."""
    return construct(Attempt, attempt_values(row, offset))


def worker_from_row(row: Sequence[Any]) -> Worker:
    """A `Worker` from `WORKER_COLUMNS` values."""
    stats = row[2]
    return construct(
        Worker,
        {
            "worker_id": row[0],
            "status": row[1],
            "heartbeat_stats": None if stats is None else from_json(stats),
            "last_heartbeat_time": row[3],
            "last_dequeue_time": row[4],
            "last_busy_time": row[5],
            "last_idle_time": row[6],
            "current_rollout_id": row[7],
            "current_attempt_id": row[8],
        },
    )


def resources_from_row(row: Sequence[Any]) -> ResourcesUpdate:
    """A `ResourcesUpdate` from `RESOURCES_COLUMNS` values."""
    return construct(
        ResourcesUpdate,
        {
            "resources_id": row[0],
            "create_time": row[1],
            "update_time": row[2],
            "version": row[3],
            "resources": NAMED_RESOURCES.validate_json(row[4]),
        },
    )


# ---------------------------------------------------------------------------------------------- encoding


ConfigColumns = tuple[str, Any, Any]
"""``(config JSON, timeout_seconds, unresponsive_seconds)`` of a rollout."""

_DEFAULT_CONFIG: ConfigColumns = (RolloutConfig().model_dump_json(), None, None)


def config_columns(config: object) -> ConfigColumns:
    """Validate a rollout config (None: the default; a `RolloutConfig`; or a dict of its fields)."""
    if config is None:
        return _DEFAULT_CONFIG
    if isinstance(config, Mapping):
        try:
            config = RolloutConfig.model_validate(config)
        except ValidationError as exc:
            raise InvalidRequestError(f"Invalid rollout config {dict(config)!r}: {exc}") from None
    elif not isinstance(config, RolloutConfig):
        raise InvalidRequestError(
            "config must be a RolloutConfig (or a dict of its fields), "
            f"got {type(config).__name__} {config!r}."
        )
    return config.model_dump_json(), config.timeout_seconds, config.unresponsive_seconds


def dump_json(name: str, value: Any) -> str:
    """`value` as JSON text; `InvalidRequestError` naming `name` if it cannot be encoded."""
    return json_text(name, value, "SQLite")


def metadata_json(name: str, value: object) -> str | None:
    """A metadata dict (or None) as JSON text; anything else raises `InvalidRequestError`."""
    return metadata_json_text(name, value, "SQLite")


dump_resources = resources_json_text
"""Validate a `NamedResources` mapping and return it as JSON text."""
