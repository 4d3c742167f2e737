"""The one check of each typed store request, run by `LightningStore` before its backend sees it.

Every public query or update method of `LightningStore` (and every REST handler) builds an
`agl_core.types.queries` object and passes it through the matching function here, which raises the
store's typed error for the first bad field and returns what the backend needs: the normalized filter
of a query, or the update with its values validated and copied. Backends never check again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agl_core.store.errors import InvalidRequestError, InvalidSpanError
from agl_core.store.logic.checks import (
    check_enqueue_requests,
    check_json_value,
    check_limit,
    check_no_nul,
    check_optional_number,
    check_optional_str,
    copy_config,
    copy_metadata,
    validate_attempt_status,
    validate_mode,
    validate_rollout_status,
    validate_sort_order,
    validate_span,
)
from agl_core.store.logic.filters import (
    FilterCondition,
    NormalizedFilter,
    resources_query_filter,
    rollout_query_filter,
    span_query_filter,
    worker_query_filter,
)
from agl_core.store.logic.sorting import sort_key_for, validate_pagination
from agl_core.store.logic.workers import worker_updates_for_heartbeat
from agl_core.types import Attempt, EnqueueRolloutRequest, ResourcesUpdate, Rollout, Span, Worker
from agl_core.types.queries import (
    AddSpans,
    AttemptQuery,
    AttemptUpdate,
    DequeueRollouts,
    EnqueueRollouts,
    ResourcesQuery,
    RolloutQuery,
    RolloutUpdate,
    SpanQuery,
    SpanSequenceIds,
    StartAttempt,
    StartRollout,
    UpdateResources,
    WorkerHeartbeat,
    WorkerQuery,
)
from agl_core.types.unset import UNSET

__all__ = [
    "check_add_spans",
    "check_attempt_query",
    "check_attempt_update",
    "check_dequeue_rollouts",
    "check_enqueue_rollouts",
    "check_id",
    "check_new_rollout",
    "check_page",
    "check_resources_query",
    "check_rollout_query",
    "check_rollout_update",
    "check_sequence_ids",
    "check_span_query",
    "check_start_attempt",
    "check_start_rollout",
    "check_update_resources",
    "check_worker_heartbeat",
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
    check_id("rollout_id", query.rollout_id)
    check_optional_str("attempt_id", query.attempt_id)
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


def check_resources_query(query: ResourcesQuery) -> NormalizedFilter:
    """Check a `ResourcesQuery`; return its filter (both conditions ANDed)."""
    where = resources_query_filter(
        resources_id=query.resources_id, resources_id_contains=query.resources_id_contains
    )
    check_page(query.sort_by, query.sort_order, query.limit, query.offset, ResourcesUpdate)
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


def check_new_rollout(
    input: Any, mode: object, resources_id: object, config: object, metadata: object
) -> EnqueueRolloutRequest:
    """Check one rollout to create; return it with a private `RolloutConfig` (never None) and metadata."""
    check_json_value("input", input)
    return _checked(input, mode, resources_id, config, metadata)


def _checked(
    input: Any, mode: object, resources_id: object, config: object, metadata: object
) -> EnqueueRolloutRequest:
    return EnqueueRolloutRequest.model_construct(
        input=input,
        mode=validate_mode(mode),
        resources_id=check_optional_str("resources_id", resources_id),
        config=copy_config(config),
        metadata=copy_metadata("metadata", metadata),
    )


def check_start_rollout(request: StartRollout) -> StartRollout:
    """Check a `StartRollout`: its rollout as in `check_new_rollout`, its worker id."""
    r = request.rollout
    rollout = check_new_rollout(r.input, r.mode, r.resources_id, r.config, r.metadata)
    return StartRollout(rollout, check_optional_str("worker_id", request.worker_id))


def check_enqueue_rollouts(request: EnqueueRollouts) -> EnqueueRollouts:
    """Check an `EnqueueRollouts` (the argument of ``enqueue_many_rollouts``); each rollout as in
    `check_new_rollout`, errors naming the request's index."""
    return EnqueueRollouts(
        [
            _checked(r.input, r.mode, r.resources_id, r.config, r.metadata)
            for r in check_enqueue_requests(request.rollouts)
        ]
    )


def check_dequeue_rollouts(request: DequeueRollouts) -> DequeueRollouts:
    """Check a `DequeueRollouts` (an integer ``limit``, an optional worker id)."""
    return DequeueRollouts(check_limit(request.limit), check_optional_str("worker_id", request.worker_id))


def check_start_attempt(request: StartAttempt) -> StartAttempt:
    """Check a `StartAttempt`."""
    check_id("rollout_id", request.rollout_id)
    return StartAttempt(request.rollout_id, check_optional_str("worker_id", request.worker_id))


def check_update_resources(request: UpdateResources) -> UpdateResources:
    """Check an `UpdateResources`: a non-empty id without NUL (the backend validates the resources)."""
    resources_id = request.resources_id
    if not isinstance(resources_id, str) or not resources_id:
        raise InvalidRequestError(f"resources_id must be a non-empty string, got {resources_id!r}.")
    check_no_nul("resources_id", resources_id)
    return request


def check_worker_heartbeat(request: WorkerHeartbeat) -> WorkerHeartbeat:
    """Check a `WorkerHeartbeat`: a non-empty id without NUL and stats that are a JSON dict (copied)."""
    worker_id = request.worker_id
    if not isinstance(worker_id, str) or not worker_id:
        raise InvalidRequestError(f"worker_id must be a non-empty string, got {worker_id!r}.")
    check_no_nul("worker_id", worker_id)
    stats = worker_updates_for_heartbeat(0.0, request.heartbeat_stats).get("heartbeat_stats", UNSET)
    return WorkerHeartbeat(worker_id, stats)


def check_attempt_query(query: AttemptQuery) -> AttemptQuery:
    """Check an `AttemptQuery` (the rollout id, the sorting by an `Attempt` field, the paging)."""
    check_id("rollout_id", query.rollout_id)
    check_page(query.sort_by, query.sort_order, query.limit, query.offset, Attempt)
    return query


def check_add_spans(request: AddSpans) -> AddSpans:
    """Check an `AddSpans`: a sequence of valid spans (`validate_span`); returns them as a list."""
    spans = request.spans
    if isinstance(spans, (str, bytes)) or not isinstance(spans, Sequence):
        raise InvalidSpanError(f"add_many_spans expects a list of Span objects, got {type(spans).__name__}.")
    return AddSpans([validate_span(span) for span in spans])


def check_sequence_ids(request: SpanSequenceIds) -> SpanSequenceIds:
    """Check a `SpanSequenceIds`: ``(rollout_id, attempt_id)`` pairs with a valid rollout id each."""
    pairs: list[tuple[str, str]] = []
    for pair in request.pairs:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InvalidRequestError(f"Expected (rollout_id, attempt_id) pairs, got {pair!r}.")
        pairs.append((check_id("rollout_id", pair[0]), pair[1]))
    return SpanSequenceIds(pairs)
