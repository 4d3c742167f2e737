"""Encoding between agl models and the PostgreSQL store's rows, and checks of call arguments.

Nested values (inputs, configs, metadata, resources, span bodies) are stored as JSON text written by
pydantic-core (NaN and infinities kept, keys of any form), exactly like the SQLite store. Rows become
models without re-validation: the store only reads what it validated on the way in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, from_json, to_json

from agl_core.store import InvalidRequestError
from agl_core.store.logic import check_json_value, check_no_nul
from agl_core.types import (
    Attempt,
    AttemptedRollout,
    NamedResources,
    ResourcesUpdate,
    Rollout,
    RolloutConfig,
    Worker,
)

__all__ = [
    "ATTEMPT_COLUMNS",
    "RESOURCES_COLUMNS",
    "ROLLOUT_COLUMNS",
    "WORKER_COLUMNS",
    "attempt_from_row",
    "attempt_values",
    "check_id",
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
_set = object.__setattr__

ROLLOUT_COLUMNS = (
    "r.rollout_id, r.input, r.start_time, r.end_time, r.mode, r.resources_id, r.status, r.config, r.metadata"
)
"""Columns (alias ``r``) that `rollout_from_row` reads."""
ATTEMPT_COLUMNS = (
    "a.rollout_id, a.attempt_id, a.sequence_id, a.start_time, a.end_time, a.status, a.worker_id, "
    "a.last_heartbeat_time, a.metadata"
)
"""Columns (alias ``a``) that `attempt_from_row` reads."""
WORKER_COLUMNS = (
    "worker_id, status, heartbeat_stats, last_heartbeat_time, last_dequeue_time, last_busy_time, "
    "last_idle_time, current_rollout_id, current_attempt_id"
)
"""Columns that `worker_from_row` reads."""
RESOURCES_COLUMNS = "resources_id, create_time, update_time, version, resources"
"""Columns that `resources_from_row` reads."""

_NAMED_RESOURCES: TypeAdapter[NamedResources] = TypeAdapter(NamedResources)


def construct(cls: type[M], values: dict[str, Any]) -> M:
    """A `cls` instance holding `values` (every field, already valid), without validation."""
    obj = cls.__new__(cls)
    _set(obj, "__dict__", values)
    _set(obj, "__pydantic_fields_set__", set(values))
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj


_configs: dict[str, RolloutConfig] = {}


def config_from_json(text: str) -> RolloutConfig:
    """A fresh `RolloutConfig` from its stored JSON (parsed once per distinct text)."""
    config = _configs.get(text)
    if config is None:
        if len(_configs) >= 1024:
            _configs.clear()
        config = _configs[text] = RolloutConfig.model_validate_json(text)
    values = dict(config.__dict__)
    values["retry_condition"] = list(values["retry_condition"])  # its one mutable field
    copy = RolloutConfig.__new__(RolloutConfig)
    _set(copy, "__dict__", values)
    _set(copy, "__pydantic_fields_set__", set(config.__pydantic_fields_set__))
    _set(copy, "__pydantic_extra__", None)
    _set(copy, "__pydantic_private__", None)
    return copy


def rollout_from_row(row: Sequence[Any], attempt: Attempt | None = None, offset: int = 0) -> Rollout:
    """A `Rollout` (an `AttemptedRollout` when `attempt` is given) from `ROLLOUT_COLUMNS` values."""
    metadata = row[offset + 8]
    values = {
        "rollout_id": row[offset],
        "input": from_json(row[offset + 1]),
        "start_time": row[offset + 2],
        "end_time": row[offset + 3],
        "mode": row[offset + 4],
        "resources_id": row[offset + 5],
        "status": row[offset + 6],
        "config": config_from_json(row[offset + 7]),
        "metadata": None if metadata is None else from_json(metadata),
    }
    if attempt is None:
        return construct(Rollout, values)
    values["attempt"] = attempt
    return construct(AttemptedRollout, values)


def attempt_values(row: Sequence[Any], offset: int = 0) -> dict[str, Any]:
    """The field values of an `Attempt` from `ATTEMPT_COLUMNS` values starting at `offset`."""
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
    """An `Attempt` from `ATTEMPT_COLUMNS` values starting at `offset`."""
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
            "resources": _NAMED_RESOURCES.validate_json(row[4]),
        },
    )


# ---------------------------------------------------------------------------------------------- arguments


def dump_json(name: str, value: Any) -> str:
    """`value` as JSON text; `InvalidRequestError` naming `name` if it cannot be encoded."""
    check_json_value(name, value)  # NaN/Infinity and nesting: refused like every other store
    try:
        text = to_json(value, inf_nan_mode="constants").decode()
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        raise InvalidRequestError(
            f"{name} must be JSON-serializable to be stored in PostgreSQL (dicts, lists, strings, numbers, "
            f"booleans, None or pydantic models); got {type(value).__name__}: {exc}"
        ) from None
    return text  # a NUL in a JSON string is the escape \u0000 here, which PostgreSQL text holds


def check_id(name: str, value: object) -> None:
    """Raise `InvalidRequestError` unless `value` is a string (an id)."""
    if not isinstance(value, str):
        raise InvalidRequestError(f"{name} must be a string, got {type(value).__name__} {value!r}.")
    check_no_nul(name, value)  # the rule of every store: no NUL in ids (PostgreSQL text has none)


def metadata_json(name: str, value: object) -> str | None:
    """A metadata dict (or None) as JSON text; anything else raises `InvalidRequestError`."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidRequestError(f"{name} must be a dict or None, got {type(value).__name__} {value!r}.")
    return dump_json(name, dict(value))


_DEFAULT_CONFIG_COLUMNS: tuple[str, float | None, float | None] = (
    RolloutConfig().model_dump_json(),
    None,
    None,
)


def config_columns(config: object) -> tuple[str, float | None, float | None]:
    """``(config JSON, timeout_seconds, unresponsive_seconds)`` of a config (None: the default)."""
    if config is None:
        return _DEFAULT_CONFIG_COLUMNS  # most rollouts: encoded once, not per call
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


def dump_resources(resources: object) -> str:
    """Validate a `NamedResources` mapping and return it as JSON text."""
    if not isinstance(resources, Mapping):
        raise InvalidRequestError(
            "resources must be a dict of name -> resource (e.g. {'main_llm': LLM(...)}), "
            f"got {type(resources).__name__}."
        )
    try:
        validated = _NAMED_RESOURCES.validate_python(dict(resources))
    except ValidationError as exc:
        raise InvalidRequestError(f"Invalid resources: {exc}") from None
    return _NAMED_RESOURCES.dump_json(validated).decode()
