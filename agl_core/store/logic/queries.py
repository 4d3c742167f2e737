"""The one check of each typed store request, run by `LightningStore` before its backend sees it.

Every public query or update method of `LightningStore` (and every REST handler) builds an
`agl_core.types.queries` object and passes it through the matching function here, which raises the
store's typed error for the first bad field and returns what the backend needs: the normalized filter
of a query, or the update with its values validated and copied. Backends never check again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agl_core.store.errors import InvalidRequestError
from agl_core.store.logic.checks import (
    check_json_value,
    check_no_nul,
    check_optional_number,
    check_optional_str,
    copy_config,
    copy_metadata,
    validate_attempt_status,
    validate_mode,
    validate_rollout_status,
    validate_sort_order,
)
from agl_core.store.logic.filters import (
    FilterCondition,
    NormalizedFilter,
    rollout_query_filter,
    span_query_filter,
    worker_query_filter,
)
from agl_core.store.logic.sorting import sort_key_for, validate_pagination
from agl_core.types import Rollout, Span, Worker
from agl_core.types.queries import AttemptUpdate, RolloutQuery, RolloutUpdate, SpanQuery, WorkerQuery
from agl_core.types.unset import UNSET

__all__ = [
    "check_attempt_update",
    "check_id",
    "check_page",
    "check_rollout_query",
    "check_rollout_update",
    "check_span_query",
    "check_worker_query",
    "encode_rollout_update",
    "with_attempt",
]


def check_id(name: str, value: object) -> str:
    """`value` if it is a string (an id) without NUL (`check_no_nul`), else `InvalidRequestError`."""
    if value.__class__ is str or isinstance(value, str):
        return check_no_nul(name, value)
    raise InvalidRequestError(f"{name} must be a string, got {type(value).__name__} {value!r}.")


def check_page(sort_by: object, sort_order: object, limit: object, offset: object, model_type: type) -> None:
    """Check a query's sorting (a sortable field of `model_type`, ``asc``/``desc``) and pagination."""
    validate_sort_order(sort_order)
    if sort_by is not None:
        sort_key_for(sort_by, model_type)  # type: ignore[arg-type]
    validate_pagination(limit, offset)


def check_span_query(query: SpanQuery) -> NormalizedFilter:
    """Check a `SpanQuery`; return its filter: ``rollout_id`` in ``must``, the field filters as the pool.

    The attempt is left out (it may be ``"latest"``, which only the backend can resolve; see
    `with_attempt`).
    """
    rollout_id = check_id("rollout_id", query.rollout_id)
    check_optional_str("attempt_id", query.attempt_id)
    if (
        query.sort_by == "sequence_id"
        and query.sort_order == "asc"
        and query.limit == -1
        and query.offset == 0
        and (query.filter_logic == "and" or query.filter_logic == "or")
        and query.trace_id is None
        and query.trace_id_contains is None
        and query.span_id is None
        and query.span_id_contains is None
        and query.parent_id is None
        and query.parent_id_contains is None
        and query.name is None
        and query.name_contains is None
    ):  # the hot call (every span of a rollout or attempt, in order): nothing else to check
        return NormalizedFilter((), (FilterCondition("rollout_id", "exact", rollout_id),), query.filter_logic)
    where = span_query_filter(
        query.rollout_id,
        None,
        trace_id=query.trace_id,
        trace_id_contains=query.trace_id_contains,
        span_id=query.span_id,
        span_id_contains=query.span_id_contains,
        parent_id=query.parent_id,
        parent_id_contains=query.parent_id_contains,
        name=query.name,
        name_contains=query.name_contains,
        filter_logic=query.filter_logic,
    )
    check_page(query.sort_by, query.sort_order, query.limit, query.offset, Span)
    return where


def with_attempt(where: NormalizedFilter, attempt_id: str | None) -> NormalizedFilter:
    """`where` narrowed to one attempt (`attempt_id` resolved; None: every attempt)."""
    if attempt_id is None:
        return where
    must = (*where.must, FilterCondition("attempt_id", "exact", attempt_id))
    return NormalizedFilter(where.conditions, must, where.aggregate)


def check_rollout_query(query: RolloutQuery) -> NormalizedFilter:
    """Check a `RolloutQuery`; return its filter."""
    where = rollout_query_filter(
        status_in=query.status_in,
        rollout_id_in=query.rollout_id_in,
        rollout_id_contains=query.rollout_id_contains,
        filter_logic=query.filter_logic,
        mode_in=query.mode_in,
        input_contains=query.input_contains,
    )
    check_page(query.sort_by, query.sort_order, query.limit, query.offset, Rollout)
    return where


def check_worker_query(query: WorkerQuery) -> NormalizedFilter:
    """Check a `WorkerQuery`; return its filter."""
    where = worker_query_filter(
        status_in=query.status_in,
        worker_id_contains=query.worker_id_contains,
        filter_logic=query.filter_logic,
    )
    check_page(query.sort_by, query.sort_order, query.limit, query.offset, Worker)
    return where


def check_rollout_update(update: RolloutUpdate) -> RolloutUpdate:
    """Check a `RolloutUpdate`; return it with a private `RolloutConfig` (None: the defaults) and metadata."""
    check_id("rollout_id", update.rollout_id)
    fields: dict[str, Any] = {}
    if update.input is not UNSET:
        check_json_value("input", update.input)
        fields["input"] = update.input
    if update.mode is not UNSET:
        fields["mode"] = validate_mode(update.mode)
    if update.resources_id is not UNSET:
        fields["resources_id"] = check_optional_str("resources_id", update.resources_id)
    if update.status is not UNSET:
        fields["status"] = validate_rollout_status(update.status)
    if update.config is not UNSET:
        fields["config"] = copy_config(update.config)
    if update.metadata is not UNSET:
        fields["metadata"] = copy_metadata("metadata", update.metadata)
    return RolloutUpdate(update.rollout_id, **fields)


def encode_rollout_update(
    update: RolloutUpdate,
    *,
    encode_input: Callable[[Any], Any],
    encode_config: Callable[[Any], Mapping[str, Any]],
    encode_metadata: Callable[[Any], Any],
) -> dict[str, Any]:
    """The changes of a checked `RolloutUpdate`, each encoded the backend's way.

    `encode_config` returns the field or fields the config is stored as; the others return the value.
    """
    changes: dict[str, Any] = {}
    for name, value in update.changes().items():
        if name == "input":
            changes["input"] = encode_input(value)
        elif name == "config":
            changes.update(encode_config(value))
        elif name == "metadata":
            changes["metadata"] = encode_metadata(value)
        else:
            changes[name] = value
    return changes


def check_attempt_update(update: AttemptUpdate) -> AttemptUpdate:
    """Check an `AttemptUpdate`; return it with its values validated and its metadata copied."""
    rid, aid = update.rollout_id, update.attempt_id
    if rid.__class__ is not str or aid.__class__ is not str or "\x00" in rid or "\x00" in aid:
        check_id("rollout_id", update.rollout_id)
        check_id("attempt_id", update.attempt_id)
    status, worker_id, heartbeat, metadata = (
        update.status,
        update.worker_id,
        update.last_heartbeat_time,
        update.metadata,
    )
    if status is not UNSET:
        status = validate_attempt_status(status)
    if worker_id is None:  # 0.3's server and client refused a null worker_id with this message too
        raise InvalidRequestError(
            "worker_id is invalid; it cannot be a null value. Omit it to keep the worker."
        )
    if worker_id is not UNSET:
        worker_id = check_optional_str("worker_id", worker_id)
    if heartbeat is not UNSET:
        heartbeat = check_optional_number("last_heartbeat_time", heartbeat)
    if metadata is not UNSET:
        metadata = copy_metadata("metadata", metadata)
    elif (
        status is update.status and worker_id is update.worker_id and heartbeat is update.last_heartbeat_time
    ):
        return update  # every value was valid as given
    return AttemptUpdate(update.rollout_id, update.attempt_id, status, worker_id, heartbeat, metadata)
