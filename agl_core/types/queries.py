"""Typed store requests: the queries and changes `LightningStore` hands to its backend.

`LightningStore.query_spans(...)` and its siblings check their arguments once and pass one of these
objects to the backend's narrow interface (``_query_spans(query, where)``, ...); the REST API parses
the same classes straight from a request (their pydantic schema is the API's). They are slotted
dataclasses rather than pydantic models because a store builds one per call: construction costs a
third of a frozen dataclass's and a small fraction of a validated model's (see ``docs/stores.md``).
Treat them as read-only.

Status, mode, filter-logic and sort-order fields accept any value here and are checked by the store
(`agl_core.store.logic.checks`), so a bad value raises the same typed error (`InvalidStatusError`, ...)
in process and over HTTP; their JSON schema still lists the allowed values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, get_args

from pydantic import ConfigDict, Field, WithJsonSchema

from agl_core.types.status import ROLLOUT_STATUSES, RolloutMode, WorkerStatus
from agl_core.types.unset import UNSET

__all__ = [
    "AddSpans",
    "AttemptQuery",
    "AttemptUpdate",
    "DequeueRollouts",
    "EnqueueRollouts",
    "ResourcesQuery",
    "RolloutQuery",
    "RolloutUpdate",
    "SpanQuery",
    "SpanSequenceIds",
    "StartAttempt",
    "StartRollout",
    "StoreQuery",
    "UpdateResources",
    "WorkerHeartbeat",
    "WorkerQuery",
]


def _enum_list_schema(values: tuple[str, ...]) -> Any:
    items = {"type": "string", "enum": list(values)}
    return WithJsonSchema({"anyOf": [{"type": "array", "items": items}, {"type": "null"}]})


_FILTER_LOGIC = WithJsonSchema({"type": "string", "enum": ["and", "or"]})
_SORT_ORDER = WithJsonSchema({"type": "string", "enum": ["asc", "desc"]})

FilterLogicField = Annotated[Any, _FILTER_LOGIC]
SortOrderField = Annotated[Any, _SORT_ORDER]
RolloutStatusList = Annotated[Any, _enum_list_schema(ROLLOUT_STATUSES)]
WorkerStatusList = Annotated[Any, _enum_list_schema(get_args(WorkerStatus))]
ModeList = Annotated[Any, _enum_list_schema(get_args(RolloutMode))]
Limit = Annotated[int, Field(description="Page size; -1 means no limit.")]
Offset = Annotated[int, Field(description="Number of matches to skip.")]

_QUERY_CONFIG = ConfigDict(extra="forbid")


class StoreQuery:
    """Base of the query classes: `keywords()` gives the call's keyword arguments back."""

    __slots__ = ()

    ADDED_FIELDS: ClassVar[frozenset[str]] = frozenset()
    """Fields Agent Lightning 0.3's signature lacks: `keywords()` leaves them out while they are None."""

    def keywords(self) -> dict[str, Any]:
        """The fields as keyword arguments of the store's public method (for a store overriding it)."""
        added = self.ADDED_FIELDS
        return {
            f.name: value
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
            if (value := getattr(self, f.name)) is not None or f.name not in added
        }


@dataclass(slots=True)
class RolloutQuery(StoreQuery):
    """Filters, sorting and paging of ``query_rollouts`` (also the query of ``GET /v1/agl/rollouts``).

    The given conditions (``status_in``, ``rollout_id_in``, ``rollout_id_contains``, ``mode_in``,
    ``input_contains``) are combined with ``filter_logic``. ``mode_in`` (new in agl) lists modes
    (``train``/``val``/``test``); a rollout without a mode never matches it. ``input_contains`` (new in
    agl) is a substring of the rollout's input as compact JSON text, ASCII letters in either case.
    """

    __pydantic_config__ = _QUERY_CONFIG
    ADDED_FIELDS: ClassVar[frozenset[str]] = frozenset(("mode_in", "input_contains"))

    status_in: RolloutStatusList = None
    rollout_id_in: Sequence[str] | None = None
    rollout_id_contains: str | None = None
    filter_logic: FilterLogicField = "and"
    sort_by: str | None = None
    sort_order: SortOrderField = "asc"
    limit: Limit = -1
    offset: Offset = 0
    mode_in: ModeList = None
    input_contains: Annotated[
        str | None,
        Field(description="Text in the input's compact JSON; ASCII letters match in either case."),
    ] = None


@dataclass(slots=True)
class SpanQuery(StoreQuery):
    """Filters, sorting and paging of ``query_spans``; ``attempt_id`` may be ``"latest"``."""

    __pydantic_config__ = _QUERY_CONFIG

    rollout_id: str
    attempt_id: str | None = None
    trace_id: str | None = None
    trace_id_contains: str | None = None
    span_id: str | None = None
    span_id_contains: str | None = None
    parent_id: str | None = None
    parent_id_contains: str | None = None
    name: str | None = None
    name_contains: str | None = None
    filter_logic: FilterLogicField = "and"
    limit: Limit = -1
    offset: Offset = 0
    sort_by: str | None = "sequence_id"
    sort_order: SortOrderField = "asc"


@dataclass(slots=True)
class WorkerQuery(StoreQuery):
    """Filters, sorting and paging of ``query_workers``."""

    __pydantic_config__ = _QUERY_CONFIG

    status_in: WorkerStatusList = None
    worker_id_contains: str | None = None
    filter_logic: FilterLogicField = "and"
    sort_by: str | None = None
    sort_order: SortOrderField = "asc"
    limit: Limit = -1
    offset: Offset = 0


@dataclass(slots=True)
class RolloutUpdate:
    """An ``update_rollout`` call: the fields that are not `UNSET` replace the rollout's (None clears).

    After `agl_core.store.logic.check_rollout_update`: ``config`` is a private `RolloutConfig` (or None
    for the defaults), ``metadata`` a private dict or None, the others validated.
    """

    rollout_id: str
    input: Any = UNSET
    mode: Any = UNSET
    resources_id: Any = UNSET
    status: Any = UNSET
    config: Any = UNSET
    metadata: Any = UNSET

    def changes(self) -> dict[str, Any]:
        """The fields to change (those not `UNSET`), by name."""
        return {
            name: value
            for name in ("input", "mode", "resources_id", "status", "config", "metadata")
            if (value := getattr(self, name)) is not UNSET
        }


@dataclass(slots=True)
class AttemptUpdate:
    """An ``update_attempt`` call: the fields that are not `UNSET` replace the attempt's.

    ``attempt_id`` may be ``"latest"``. After `agl_core.store.logic.check_attempt_update` the status is
    valid, ``last_heartbeat_time`` a number or None and ``metadata`` a private dict or None.
    """

    rollout_id: str
    attempt_id: str
    status: Any = UNSET
    worker_id: Any = UNSET
    last_heartbeat_time: Any = UNSET
    metadata: Any = UNSET

    def changes(self) -> dict[str, Any]:
        """The fields to change (those not `UNSET`), by name."""
        return {
            name: value
            for name in ("status", "worker_id", "last_heartbeat_time", "metadata")
            if (value := getattr(self, name)) is not UNSET
        }


@dataclass(slots=True)
class AttemptQuery(StoreQuery):
    """Sorting and paging of ``query_attempts``: the attempts of one rollout."""

    rollout_id: str
    sort_by: str | None = "sequence_id"
    sort_order: SortOrderField = "asc"
    limit: Limit = -1
    offset: Offset = 0


@dataclass(slots=True)
class StartRollout:
    """A ``start_rollout`` call: a rollout created in ``preparing`` with attempt #1, not queued.

    After `agl_core.store.logic.check_start_rollout`: ``rollout`` is an `EnqueueRolloutRequest` whose
    mode and resources id are valid and whose ``config`` (never None) and ``metadata`` are private copies.
    """

    rollout: Any
    worker_id: Any = None


@dataclass(slots=True)
class EnqueueRollouts:
    """An ``enqueue_rollout`` or ``enqueue_many_rollouts`` call: rollouts to queue, in order.

    After `agl_core.store.logic.check_enqueue_rollouts`: a list of checked `EnqueueRolloutRequest` as in
    `StartRollout`.
    """

    rollouts: Sequence[Any]


@dataclass(slots=True)
class DequeueRollouts:
    """A ``dequeue_rollout`` (``limit=1``) or ``dequeue_many_rollouts`` call; checked, ``limit`` >= 1."""

    limit: Any = 1
    worker_id: Any = None


@dataclass(slots=True)
class StartAttempt:
    """A ``start_attempt`` call: a new ``preparing`` attempt of a rollout (a manual retry)."""

    rollout_id: Any
    worker_id: Any = None


@dataclass(slots=True)
class AddSpans:
    """An ``add_span``/``add_many_spans``/``add_otel_span`` call: spans to store, in order.

    After `agl_core.store.logic.check_add_spans`: a list of at least one valid span (`validate_span`).
    """

    spans: Sequence[Any]


@dataclass(slots=True)
class SpanSequenceIds:
    """A ``get_next_span_sequence_id``/``get_many_span_sequence_ids`` call: one id per
    ``(rollout_id, attempt_id)`` pair; checked, at least one pair."""

    pairs: Sequence[tuple[str, str]]


@dataclass(slots=True)
class WorkerHeartbeat:
    """An ``update_worker`` call: a heartbeat of one worker, replacing its stats unless they are `UNSET`.

    After `agl_core.store.logic.check_worker_heartbeat`: a non-empty id and a copied dict (or `UNSET`).
    """

    worker_id: Any
    heartbeat_stats: Any = UNSET


@dataclass(slots=True)
class UpdateResources:
    """An ``update_resources`` call: the snapshot to store under ``resources_id`` (an upsert).

    After `agl_core.store.logic.check_update_resources`: a non-empty id; the resources as given.
    """

    resources_id: Any
    resources: Any


@dataclass(slots=True)
class ResourcesQuery(StoreQuery):
    """Filters (ANDed), sorting and paging of ``query_resources``."""

    resources_id: Any = None
    resources_id_contains: Any = None
    sort_by: Any = None
    sort_order: Any = "asc"
    limit: Any = -1
    offset: Any = 0
