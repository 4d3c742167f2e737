"""Argument checks every store applies before it changes state (same rules, same messages)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import ValidationError

from agl_core.store.errors import (
    InvalidFilterError,
    InvalidRequestError,
    InvalidSpanError,
    InvalidStatusError,
)
from agl_core.types import Span
from agl_core.types.status import (
    ATTEMPT_STATUSES,
    ROLLOUT_STATUSES,
    AttemptStatus,
    RolloutMode,
    RolloutStatus,
    WorkerStatus,
)
from agl_core.types.unset import UNSET

if TYPE_CHECKING:
    pass


from agl_core.types import EnqueueRolloutRequest, RolloutConfig

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_STORE_INT",
    "check_enqueue_requests",
    "check_int_bound",
    "check_json_value",
    "check_limit",
    "check_no_nul",
    "check_optional_number",
    "check_optional_str",
    "check_rollout_ids",
    "check_timeout",
    "copy_config",
    "copy_metadata",
    "rollout_changes",
    "validate_attempt_status",
    "validate_filter_logic",
    "validate_mode",
    "validate_rollout_status",
    "validate_sort_order",
    "validate_span",
    "validate_statuses",
    "validate_worker_status",
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

_BARE = frozenset((str, int, bool, type(None)))


def check_json_value(name: str, value: object) -> None:
    """Raise `InvalidRequestError` if `value` nests deeper than `MAX_JSON_DEPTH` or holds NaN/Infinity.

    JSON has no NaN or Infinity, so no backend can store them faithfully (HTTP would turn them into
    null); they are refused everywhere with the same message instead. `name` starts the message.
    """
    if value.__class__ not in _BARE:
        problem = _json_problem(value)
        if problem is not None:
            raise InvalidRequestError(f"{name} {problem}")


def _json_problem(value: object) -> str | None:
    """What makes `value` unstorable as JSON (the end of `check_json_value`'s message), or None.

    Walks without recursion.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        cls = item.__class__
        if cls is float:
            if item != item or item in (float("inf"), float("-inf")):
                return (
                    f"contains {item!r}; JSON has no NaN or Infinity, so stores refuse them. "
                    "Use None or a string such as 'nan' instead."
                )
        elif cls is dict or cls is list or cls is tuple or isinstance(item, (Mapping, list, tuple)):
            if depth >= MAX_JSON_DEPTH:
                return (
                    f"is nested more than {MAX_JSON_DEPTH} levels deep; stores accept JSON values "
                    f"up to {MAX_JSON_DEPTH} levels. Flatten it or store it as a JSON string."
                )
            children = item.values() if cls is dict or isinstance(item, Mapping) else item
            for child in children:
                if child.__class__ not in _BARE:
                    stack.append((child, depth + 1))
        elif isinstance(item, float):
            stack.append((float(item), depth))
    return None


def check_no_nul(name: str, value: str, error: type[InvalidRequestError] = InvalidRequestError) -> str:
    """`value` unless it holds a NUL character (U+0000); then `error` naming `name`.

    The rule of every backend for text a store keys, indexes or filters on (ids, span names, trace and
    parent ids, filter strings): PostgreSQL text cannot hold NUL, so all backends refuse it alike
    (docs/guarantees.md). NUL inside JSON values (inputs, metadata, attributes) is data and is kept.
    """
    if "\x00" in value:
        raise error(
            f"{name} contains a NUL character (U+0000) at index {value.index(chr(0))}; stores keep no NUL "
            "in ids, names or filter text. Remove it, or put the text in a JSON value instead."
        )
    return value


def check_optional_str(name: str, value: object) -> str | None:
    """`value` if it is a string without NUL (`check_no_nul`) or None, else `InvalidRequestError`."""
    if value is None:
        return value
    if isinstance(value, str):
        return check_no_nul(name, value)
    raise InvalidRequestError(f"{name} must be a string or None, got {type(value).__name__} {value!r}.")


def check_optional_number(name: str, value: object) -> float | None:
    """`value` if it is an int/float (not bool) or None, else `InvalidRequestError`."""
    if value is None or value.__class__ is float or value.__class__ is int:
        return value
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


# ---------------------------------------------------------------------------------------------- validation

_ROLLOUT_STATUS_SET: frozenset[str] = frozenset(ROLLOUT_STATUSES)
_ATTEMPT_STATUS_SET: frozenset[str] = frozenset(ATTEMPT_STATUSES)
_WORKER_STATUSES: tuple[str, ...] = get_args(WorkerStatus)
_WORKER_STATUS_SET: frozenset[str] = frozenset(_WORKER_STATUSES)
_MODES: tuple[str, ...] = get_args(RolloutMode)
_STATUS_SETS: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "rollout": (_ROLLOUT_STATUS_SET, ROLLOUT_STATUSES),
    "attempt": (_ATTEMPT_STATUS_SET, ATTEMPT_STATUSES),
    "worker": (_WORKER_STATUS_SET, _WORKER_STATUSES),
}


def validate_rollout_status(status: object) -> RolloutStatus:
    """Return `status` if it is a rollout status, else raise `InvalidStatusError`."""
    if status.__class__ is str and status in _ROLLOUT_STATUS_SET:
        return status  # type: ignore[return-value]
    raise InvalidStatusError("rollout", status, ROLLOUT_STATUSES)


def validate_attempt_status(status: object) -> AttemptStatus:
    """Return `status` if it is an attempt status, else raise `InvalidStatusError`."""
    if status.__class__ is str and status in _ATTEMPT_STATUS_SET:
        return status  # type: ignore[return-value]
    raise InvalidStatusError("attempt", status, ATTEMPT_STATUSES)


def validate_worker_status(status: object) -> WorkerStatus:
    """Return `status` if it is a worker status, else raise `InvalidStatusError`."""
    if status.__class__ is str and status in _WORKER_STATUS_SET:
        return status  # type: ignore[return-value]
    raise InvalidStatusError("worker", status, _WORKER_STATUSES)


def validate_statuses(values: object, kind: Literal["rollout", "attempt", "worker"]) -> tuple[str, ...]:
    """Validate a ``status_in`` argument: a list (not a string) of valid statuses of `kind`."""
    allowed_set, allowed = _STATUS_SETS[kind]
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidStatusError(
            kind,
            values,
            allowed,
            f"status_in must be a list of {kind} statuses, e.g. [{allowed[0]!r}], not {values!r}.",
        )
    result = tuple(values)
    for value in result:
        if value.__class__ is not str or value not in allowed_set:
            raise InvalidStatusError(kind, value, allowed)
    return result


def validate_mode(mode: object) -> RolloutMode | None:
    """Return `mode` if it is None or a rollout mode, else raise `InvalidRequestError`."""
    if mode is None or (mode.__class__ is str and mode in _MODES):
        return mode  # type: ignore[return-value]
    raise InvalidRequestError(
        f"Invalid rollout mode {mode!r}. Use one of: {', '.join(map(repr, _MODES))} or None."
    )


def rollout_changes(
    input: object,
    mode: object,
    resources_id: object,
    status: object,
    config: object,
    metadata: object,
    *,
    encode_input: Callable[[Any], Any],
    encode_config: Callable[[Any], Mapping[str, Any]],
    encode_metadata: Callable[[Any], Any],
) -> dict[str, Any]:
    """The fields an `update_rollout` call sets, checked, each encoded the backend's way.

    Arguments left `UNSET` are left out. Mode, resources id and status are checked here; `input`,
    `config` (whose encoder returns the field or fields it is stored as) and `metadata` by the
    backend's encoders, which raise `InvalidRequestError` for what they cannot store.
    """
    changes: dict[str, Any] = {}
    if input is not UNSET:
        check_json_value("input", input)
        changes["input"] = encode_input(input)
    if mode is not UNSET:
        changes["mode"] = validate_mode(mode)
    if resources_id is not UNSET:
        changes["resources_id"] = check_optional_str("resources_id", resources_id)
    if status is not UNSET:
        changes["status"] = validate_rollout_status(status)
    if config is not UNSET:
        changes.update(encode_config(config))
    if metadata is not UNSET:
        check_json_value("metadata", metadata)
        changes["metadata"] = encode_metadata(metadata)
    return changes


def validate_filter_logic(value: object) -> Literal["and", "or"]:
    """Return `value` if it is ``"and"`` or ``"or"``, else raise `InvalidFilterError`."""
    if value == "and" or value == "or":
        return value
    raise InvalidFilterError(f"Invalid filter_logic {value!r}. Use 'and' or 'or'.")


def validate_sort_order(value: object) -> Literal["asc", "desc"]:
    """Return `value` if it is ``"asc"`` or ``"desc"``, else raise `InvalidFilterError`."""
    if value == "asc" or value == "desc":
        return value
    raise InvalidFilterError(f"Invalid sort_order {value!r}. Use 'asc' or 'desc'.")


_SPAN_TEXT_FIELDS = ("rollout_id", "attempt_id", "span_id", "trace_id", "parent_id", "name")
"""Span fields stores key or index as text: `check_no_nul` applies to them."""


def validate_span(span: object) -> Span:
    """Return `span` if a store can key it, else raise `InvalidSpanError`.

    Requires an `agl_core.types.Span` with non-empty string ``rollout_id``, ``attempt_id`` and
    ``span_id``, an integer ``sequence_id >= 0`` and no NUL in the text fields stores index.
    """
    if not isinstance(span, Span):
        raise InvalidSpanError(
            f"Expected an agl_core.types.Span, got {type(span).__name__}. Convert OpenTelemetry spans with "
            "add_otel_span() or Span.from_opentelemetry()."
        )
    for field in ("rollout_id", "attempt_id", "span_id"):
        value = getattr(span, field)
        if value.__class__ is not str or not value:
            raise InvalidSpanError(
                f"Span {field} must be a non-empty string, got {value!r}. Set it before adding the span "
                "(the tracer does this for spans of a rollout)."
            )
    seq = span.sequence_id
    if seq.__class__ is not int or seq < 0:
        raise InvalidSpanError(
            f"Span sequence_id must be an integer >= 0, got {seq!r}. "
            "Use 0 to let the store assign the next one."
        )
    if seq > MAX_STORE_INT:
        check_int_bound("Span sequence_id", seq, InvalidSpanError)
    for field in _SPAN_TEXT_FIELDS:
        text = getattr(span, field)
        if text.__class__ is str:
            check_no_nul(f"Span {field}", text, InvalidSpanError)
    attributes = span.attributes
    if attributes and (problem := _json_problem(attributes)) is not None:  # the name built only then
        raise InvalidRequestError(f"Span {span.span_id} attributes {problem}")
    return span


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
        return RolloutConfig.model_construct(
            timeout_seconds=None, unresponsive_seconds=None, max_attempts=1, retry_condition=[]
        )
    if isinstance(config, RolloutConfig):
        return RolloutConfig.model_construct(
            timeout_seconds=config.timeout_seconds,
            unresponsive_seconds=config.unresponsive_seconds,
            max_attempts=config.max_attempts,
            retry_condition=list(config.retry_condition),
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
