"""Checks of `SqliteLightningStore` arguments, run on the caller's thread before a job is queued.

Each function returns the value to store (JSON text for nested values) or raises
`InvalidRequestError` naming the argument and the fix, so bad input fails before any state changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from agl_core.store._sqlite_codec import NAMED_RESOURCES, dump_json
from agl_core.store.errors import InvalidRequestError
from agl_core.types import EnqueueRolloutRequest, RolloutConfig

__all__ = [
    "ConfigColumns",
    "check_enqueue_requests",
    "check_id",
    "check_optional_number",
    "check_optional_str",
    "check_rollout_ids",
    "check_timeout",
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


def check_optional_str(name: str, value: object) -> str | None:
    """`value` if it is a string or None, else `InvalidRequestError`."""
    if value is None or isinstance(value, str):
        return value
    raise InvalidRequestError(f"{name} must be a string or None, got {type(value).__name__} {value!r}.")


def check_optional_number(name: str, value: object) -> float | None:
    """`value` if it is an int/float (not bool) or None, else `InvalidRequestError`."""
    if value is None or value.__class__ is float or value.__class__ is int:
        return value  # type: ignore[return-value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise InvalidRequestError(
        f"{name} must be a number of seconds since the epoch or None, got {type(value).__name__} {value!r}."
    )


def check_rollout_ids(value: object) -> list[str]:
    """The ``rollout_ids`` of `wait_for_rollouts`: a list (not a string) of string ids."""
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
    """The ``timeout`` of `wait_for_rollouts`: None (wait forever) or a number of seconds."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise InvalidRequestError(f"timeout must be a number of seconds or None, got {value!r}.")


def check_enqueue_requests(requests: object) -> list[EnqueueRolloutRequest]:
    """The argument of `enqueue_many_rollouts`: a sequence of requests (or dicts of their fields)."""
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
