"""Checks of `SqliteLightningStore` arguments, run on the caller's thread before a job is queued.

Each function returns the value to store (JSON text for nested values) or raises
`InvalidRequestError` naming the argument and the fix, so bad input fails before any state changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from agl_core.store._sqlite_codec import NAMED_RESOURCES, dump_json
from agl_core.store.errors import InvalidRequestError
from agl_core.types import RolloutConfig

__all__ = [
    "ConfigColumns",
    "check_id",
    "config_columns",
    "dump_resources",
    "metadata_json",
]


def check_id(name: str, value: object) -> None:
    """Raise `InvalidRequestError` unless `value` is a string (an id)."""
    if value.__class__ is not str and not isinstance(value, str):
        raise InvalidRequestError(f"{name} must be a string, got {type(value).__name__} {value!r}.")


def metadata_json(name: str, value: object) -> str | None:
    """A metadata dict (or None) as JSON text; anything else raises `InvalidRequestError`."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidRequestError(f"{name} must be a dict or None, got {type(value).__name__} {value!r}.")
    return dump_json(name, dict(value))


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


def dump_resources(resources: object) -> str:
    """Validate a `NamedResources` mapping and return it as JSON text."""
    if not isinstance(resources, Mapping):
        raise InvalidRequestError(
            f"resources must be a dict of name -> resource (e.g. {{'main_llm': LLM(...)}}), "
            f"got {type(resources).__name__}."
        )
    try:
        validated = NAMED_RESOURCES.validate_python(dict(resources))
    except ValidationError as exc:
        raise InvalidRequestError(f"Invalid resources: {exc}") from None
    return NAMED_RESOURCES.dump_json(validated).decode()
