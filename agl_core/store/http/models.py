"""Wire models of the store's REST API: request bodies, query parameters and the extra responses.

Bodies reject unknown fields (a typo is a 422 naming the field, not a silently ignored filter).
Status, mode, filter-logic and sort-order fields accept any JSON value and are validated by the
store itself, so a bad value raises the same typed error (`InvalidStatusError`, ...) over HTTP as in
process; their OpenAPI schema still lists the allowed values.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union, get_args

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from agl_core.types import (
    Attempt,
    AttemptedRollout,
    EnqueueRolloutRequest,
    ResourcesUpdate,
    Rollout,
    RolloutConfig,
    Span,
    Worker,
)
from agl_core.types.queries import (
    Limit,
    Offset,
    RolloutQuery,
    SortOrderField,
    SpanQuery,
    StoreQuery,
    WorkerQuery,
)
from agl_core.types.status import ATTEMPT_STATUSES, ROLLOUT_STATUSES, RolloutMode

__all__ = [
    "AddSpansResponse",
    "AnyRollout",
    "AttemptQuery",
    "DequeueBody",
    "DoctorQuery",
    "EnqueueBody",
    "ErrorInfo",
    "ErrorResponse",
    "HealthResponse",
    "NextSequenceIdBody",
    "QueryModel",
    "ResourcesQuery",
    "RolloutQuery",
    "SequenceIdResponse",
    "SequenceIdsBody",
    "SequenceIdsResponse",
    "SpanQuery",
    "SpansBatchBody",
    "StartAttemptBody",
    "StartRolloutBody",
    "StoreQuery",
    "UpdateAttemptBody",
    "UpdateRolloutBody",
    "UpdateWorkerBody",
    "WaitBody",
    "WorkerQuery",
]


def _enum_schema(values: tuple[str, ...], nullable: bool = False) -> Any:
    schema: dict[str, Any] = {"type": "string", "enum": list(values)}
    if nullable:
        schema = {"anyOf": [schema, {"type": "null"}]}
    return WithJsonSchema(schema)


_MODES: tuple[str, ...] = get_args(RolloutMode)

RolloutStatusField = Annotated[Any, _enum_schema(ROLLOUT_STATUSES)]
AttemptStatusField = Annotated[Any, _enum_schema(ATTEMPT_STATUSES)]
ModeField = Annotated[Any, _enum_schema(_MODES, nullable=True)]

AnyRollout = Union[AttemptedRollout, Rollout]  # noqa: UP007 - a runtime union for pydantic
"""A rollout, with its latest attempt attached when it has one."""


def _drop_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def _optional(**kwargs: Any) -> Any:
    """A field that may be left out; leaving it out is not the same as sending null (no schema default)."""
    return Field(default=None, json_schema_extra=_drop_default, **kwargs)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class QueryModel(_Body):
    """Base of the pydantic query models: a field of the wrong type is reported like the store reports it.

    The store's own requests (`RolloutQuery`, `SpanQuery`, `WorkerQuery`, from `agl_core.types.queries`)
    are slotted dataclasses reported the same way.

    ``limit``/``offset`` -> `InvalidRequestError`; any other filter or sort field -> `InvalidFilterError`
    (so a typo'd type over HTTP raises the same class as in process).
    """


# ------------------------------------------------------------------------------------------- errors


class ErrorInfo(BaseModel):
    """What went wrong: the error class name, a message that says how to fix it, and rebuild details."""

    type: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorResponse(BaseModel):
    """Body of every 4xx/5xx answer of the store API."""

    error: ErrorInfo
    detail: str | None = None
    """``error.message`` again, under Agent Lightning 0.3's name (FastAPI's ``{"detail": ...}``)."""


class HealthResponse(BaseModel):
    """Body of ``GET /health``."""

    status: Literal["ok"] = "ok"


# ------------------------------------------------------------------------------------------- queue


class EnqueueBody(_Body):
    """``POST /v1/agl/queues/rollouts/enqueue``: rollouts to append to the queue, in order."""

    rollouts: list[EnqueueRolloutRequest]


class DequeueBody(_Body):
    """``POST /v1/agl/queues/rollouts/dequeue``: claim up to ``limit`` rollouts (<= 0 claims none)."""

    limit: int = 1
    worker_id: str | None = None


# ------------------------------------------------------------------------------------------- rollouts


class StartRolloutBody(_Body):
    """``POST /v1/agl/rollouts``: create a rollout in ``preparing`` with attempt #1 (not queued)."""

    input: Any = None
    mode: ModeField = None
    resources_id: str | None = None
    config: RolloutConfig | None = None
    metadata: dict[str, Any] | None = None
    worker_id: str | None = None


class UpdateRolloutBody(_Body):
    """``POST /v1/agl/rollouts/{rollout_id}``: only the fields present are changed; null clears."""

    input: Any = _optional()
    mode: ModeField = _optional()
    resources_id: str | None = _optional()
    status: RolloutStatusField = _optional()
    config: RolloutConfig | None = _optional()
    metadata: dict[str, Any] | None = _optional()


class StartAttemptBody(_Body):
    """``POST /v1/agl/rollouts/{rollout_id}/attempts``: manual retry, optionally on behalf of a worker."""

    worker_id: str | None = None


class AttemptQuery(QueryModel):
    """Sorting and paging of ``query_attempts``."""

    sort_by: str | None = "sequence_id"
    sort_order: SortOrderField = "asc"
    limit: Limit = -1
    offset: Offset = 0


class UpdateAttemptBody(_Body):
    """``POST /v1/agl/rollouts/{rollout_id}/attempts/{attempt_id}``: only the fields present change."""

    status: AttemptStatusField = _optional()
    worker_id: str | None = _optional()
    last_heartbeat_time: float | None = _optional(allow_inf_nan=False)
    metadata: dict[str, Any] | None = _optional()


class WaitBody(_Body):
    """``POST /v1/agl/waits/rollouts``: long-poll until the rollouts finish (server caps each poll)."""

    rollout_ids: list[str]
    timeout: float | None = Field(
        default=None,
        allow_inf_nan=False,
        description="Seconds to wait; <= 0 checks once; null waits up to the server's per-poll cap.",
    )


class DoctorQuery(QueryModel):
    """Query of ``GET /v1/agl/rollouts/{rollout_id}/doctor``: which spans, explained by which adapter."""

    attempt: str = Field(default="latest", description="latest, all, or an attempt id.")
    adapter: str = Field(default="triplet", description="triplet, proxy-triplet, or another triplet adapter.")


# ------------------------------------------------------------------------------------------- workers


class UpdateWorkerBody(_Body):
    """``POST /v1/agl/workers/{worker_id}``: heartbeat, replacing ``heartbeat_stats`` when present."""

    heartbeat_stats: dict[str, Any] | None = _optional()


# ------------------------------------------------------------------------------------------- resources


class ResourcesQuery(QueryModel):
    """Filters, sorting and paging of ``query_resources``."""

    resources_id: str | None = None
    resources_id_contains: str | None = None
    sort_by: str | None = None
    sort_order: SortOrderField = "asc"
    limit: Limit = -1
    offset: Offset = 0


# ------------------------------------------------------------------------------------------- spans


class SpansBatchBody(_Body):
    """``POST /v1/agl/spans/batch``: many spans in one request (``add_many_spans``)."""

    spans: list[Span]


class AddSpansResponse(BaseModel):
    """Answer of ``POST /v1/agl/spans/batch``: indices (into the request's list) of the spans inserted.

    Duplicates of stored spans are skipped, so the list may be shorter than the request.
    ``sequence_ids`` holds the sequence id of each inserted span (the store numbers spans sent with
    ``sequence_id`` 0); an older server leaves it out.
    """

    inserted: list[int]
    sequence_ids: list[int] | None = None


class NextSequenceIdBody(_Body):
    """``POST /v1/agl/spans/next``: issue the next sequence id of a rollout."""

    rollout_id: str
    attempt_id: str


class SequenceIdResponse(BaseModel):
    """One issued sequence id."""

    sequence_id: int


class SequenceIdsBody(_Body):
    """``POST /v1/agl/spans/sequence-ids``: issue one sequence id per ``[rollout_id, attempt_id]``."""

    rollout_attempt_ids: list[tuple[str, str]]


class SequenceIdsResponse(BaseModel):
    """Issued sequence ids, in request order."""

    sequence_ids: list[int]


RESPONSE_MODELS: tuple[Any, ...] = (Attempt, AttemptedRollout, ResourcesUpdate, Rollout, Span, Worker)
"""Store models that appear in responses (for the OpenAPI document)."""
