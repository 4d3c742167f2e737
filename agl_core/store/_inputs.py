"""Argument checks every store backend applies before it changes state (same rules, same messages).

Public through :mod:`agl_core.store.logic`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import ValidationError

from agl_core.store.errors import InvalidRequestError
from agl_core.types import EnqueueRolloutRequest

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_STORE_INT",
    "check_enqueue_requests",
    "check_int_bound",
    "check_json_value",
    "check_optional_number",
    "check_optional_str",
    "check_rollout_ids",
    "check_timeout",
]


MAX_STORE_INT = 2**63 - 1
"""Largest integer a store accepts (``limit``, ``offset``, span ``sequence_id``): SQLite's INTEGER
maximum, enforced on every backend so all answer the same (documented in docs/guarantees.md)."""


def check_int_bound(name: str, value: int, error: type[InvalidRequestError] = InvalidRequestError) -> int:
    """`value` if it is at most `MAX_STORE_INT`, else `error` naming `name` and the bound."""
    if value > MAX_STORE_INT:
        raise error(f"{name} must be at most 2**63-1 ({MAX_STORE_INT}), got {value}.")
    return value


MAX_JSON_DEPTH = 100
"""Deepest nesting of lists and dicts a store accepts in a JSON value (rollout input, metadata, span
attributes, heartbeat stats); the same on every backend (documented in docs/guarantees.md)."""

_BARE = (str, int, bool, type(None))


def check_json_value(name: str, value: object) -> None:
    """Raise `InvalidRequestError` if `value` nests deeper than `MAX_JSON_DEPTH` or holds NaN/Infinity.

    JSON has no NaN or Infinity, so no backend can store them faithfully (HTTP would turn them into
    null); they are refused everywhere with the same message instead. Walks without recursion.
    """
    if value.__class__ in _BARE:
        return
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        cls = item.__class__
        if cls is float:
            if item != item or item in (float("inf"), float("-inf")):  # type: ignore[operator]
                raise InvalidRequestError(
                    f"{name} contains {item!r}; JSON has no NaN or Infinity, so stores refuse them. "
                    "Use None or a string such as 'nan' instead."
                )
        elif cls is dict or cls is list or cls is tuple or isinstance(item, (Mapping, list, tuple)):
            if depth >= MAX_JSON_DEPTH:
                raise InvalidRequestError(
                    f"{name} is nested more than {MAX_JSON_DEPTH} levels deep; stores accept JSON values "
                    f"up to {MAX_JSON_DEPTH} levels. Flatten it or store it as a JSON string."
                )
            children = item.values() if isinstance(item, Mapping) else item  # type: ignore[union-attr]
            for child in children:  # type: ignore[union-attr]
                if child.__class__ not in _BARE:
                    stack.append((child, depth + 1))
        elif isinstance(item, float):
            stack.append((float(item), depth))


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
            check_json_value(f"input of request {index}", request.input)
            check_json_value(f"metadata of request {index}", request.metadata)
            result.append(request)
        elif isinstance(request, Mapping):
            check_json_value(f"input of request {index}", request.get("input"))
            check_json_value(f"metadata of request {index}", request.get("metadata"))
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
