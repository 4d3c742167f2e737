"""The route table of the store API: one place that the server, the OpenAPI document and the tests use.

Paths and methods of ``/v1/agl/...`` are those of Agent Lightning 0.3 (as in Agent Lightning 0.3), so its
clients
keep working; agl adds batch routes (``/spans/batch``, ``/spans/sequence-ids``), the OpenAPI
document and a root ``/health``. The order matters: literal paths (``/rollouts/search``,
``/resources/latest``) come before the ``{id}`` paths they would otherwise be taken for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from agl_core.store.http import models as m
from agl_core.types import (
    Attempt,
    AttemptedRollout,
    NamedResources,
    PaginatedResult,
    ResourcesUpdate,
    Rollout,
    Span,
    Worker,
)
from agl_core.types.reports import DoctorReport

__all__ = ["API_PREFIX", "OTLP_TRACES_PATH", "ROUTES", "Route", "route_by_name"]

API_PREFIX = "/v1/agl"
"""Prefix of the store routes."""

OTLP_TRACES_PATH = "/v1/traces"
"""OTLP/HTTP traces intake path."""

BodyKind = Literal["json", "otlp", "none"]


@dataclass(frozen=True)
class Route:
    """One API route: where it lives, what it takes and returns, and how the server treats it."""

    name: str
    """Handler name and OpenAPI ``operationId``."""
    method: str
    path: str
    summary: str
    body: Any = None
    """Type of the JSON body (a pydantic model or any type pydantic validates), or None."""
    body_required: bool = False
    query: type[BaseModel] | None = None
    """Model of the query-string parameters (GET routes)."""
    response: Any = None
    """Type of the JSON answer (None: ``null`` is the only answer)."""
    status: int = 200
    mutating: bool = False
    """Honours ``Idempotency-Key``: a retried request gets the first answer, not a second effect."""
    auth: bool = True
    """Requires the bearer token when the server has one."""
    kind: BodyKind = "json"
    tag: str = "store"


def _r(name: str, method: str, path: str, summary: str, **kwargs: Any) -> Route:
    return Route(name=name, method=method, path=path, summary=summary, **kwargs)


P = API_PREFIX
ROUTES: tuple[Route, ...] = (
    _r(
        "root_health",
        "GET",
        "/health",
        "Liveness probe (never needs a token).",
        response=m.HealthResponse,
        auth=False,
        tag="meta",
    ),
    _r(
        "health",
        "GET",
        f"{P}/health",
        "Liveness probe (never needs a token).",
        response=m.HealthResponse,
        auth=False,
        tag="meta",
    ),
    _r("openapi", "GET", f"{P}/openapi.json", "This OpenAPI document.", response=dict[str, Any], tag="meta"),
    _r(
        "statistics",
        "GET",
        f"{P}/statistics",
        "Counts of rollouts, attempts, spans, resources, workers.",
        response=dict[str, Any],
    ),
    # queue
    _r(
        "enqueue_rollouts",
        "POST",
        f"{P}/queues/rollouts/enqueue",
        "Enqueue rollouts in order (enqueue_rollout / enqueue_many_rollouts).",
        body=m.EnqueueBody,
        body_required=True,
        response=list[Rollout],
        status=201,
        mutating=True,
    ),
    _r(
        "dequeue_rollouts",
        "POST",
        f"{P}/queues/rollouts/dequeue",
        "Claim up to `limit` queued rollouts (dequeue_rollout / dequeue_many_rollouts).",
        body=m.DequeueBody,
        response=list[AttemptedRollout],
        mutating=True,
    ),
    # rollouts
    _r(
        "start_rollout",
        "POST",
        f"{P}/rollouts",
        "Create a rollout with attempt #1 (start_rollout).",
        body=m.StartRolloutBody,
        body_required=True,
        response=AttemptedRollout,
        status=201,
        mutating=True,
    ),
    _r(
        "query_rollouts_get",
        "GET",
        f"{P}/rollouts",
        "Query rollouts (query_rollouts).",
        query=m.RolloutQuery,
        response=PaginatedResult[m.AnyRollout],
    ),
    _r(
        "query_rollouts",
        "POST",
        f"{P}/rollouts/search",
        "Query rollouts with a JSON body (query_rollouts).",
        body=m.RolloutQuery,
        response=PaginatedResult[m.AnyRollout],
    ),
    _r(
        "get_rollout",
        "GET",
        f"{P}/rollouts/{{rollout_id}}",
        "One rollout or null (get_rollout_by_id).",
        response=m.AnyRollout | None,
    ),
    _r(
        "update_rollout",
        "POST",
        f"{P}/rollouts/{{rollout_id}}",
        "Change the fields present in the body (update_rollout).",
        body=m.UpdateRolloutBody,
        response=Rollout,
        mutating=True,
    ),
    _r(
        "start_attempt",
        "POST",
        f"{P}/rollouts/{{rollout_id}}/attempts",
        "New attempt (start_attempt).",
        body=m.StartAttemptBody,
        response=AttemptedRollout,
        status=201,
        mutating=True,
    ),
    _r(
        "query_attempts_get",
        "GET",
        f"{P}/rollouts/{{rollout_id}}/attempts",
        "Attempts (query_attempts).",
        query=m.AttemptQuery,
        response=PaginatedResult[Attempt],
    ),
    _r(
        "query_attempts",
        "POST",
        f"{P}/rollouts/{{rollout_id}}/attempts/search",
        "Attempts with a JSON body (query_attempts).",
        body=m.AttemptQuery,
        response=PaginatedResult[Attempt],
    ),
    _r(
        "latest_attempt",
        "GET",
        f"{P}/rollouts/{{rollout_id}}/attempts/latest",
        "The latest attempt or null (get_latest_attempt).",
        response=Attempt | None,
    ),
    _r(
        "update_attempt",
        "POST",
        f"{P}/rollouts/{{rollout_id}}/attempts/{{attempt_id}}",
        "Change the fields present in the body; attempt_id may be 'latest' (update_attempt).",
        body=m.UpdateAttemptBody,
        response=Attempt,
        mutating=True,
    ),
    _r(
        "rollout_doctor",
        "GET",
        f"{P}/rollouts/{{rollout_id}}/doctor",
        "What training data the rollout yields and each problem with a fix (agl doctor; read-only).",
        query=m.DoctorQuery,
        response=DoctorReport,
    ),
    _r(
        "wait_rollouts",
        "POST",
        f"{P}/waits/rollouts",
        "Long-poll until the rollouts finish; returns those finished (wait_for_rollouts).",
        body=m.WaitBody,
        body_required=True,
        response=list[Rollout],
    ),
    # workers
    _r(
        "query_workers_get",
        "GET",
        f"{P}/workers",
        "Query workers (query_workers).",
        query=m.WorkerQuery,
        response=PaginatedResult[Worker],
    ),
    _r(
        "query_workers",
        "POST",
        f"{P}/workers/search",
        "Query workers with a JSON body (query_workers).",
        body=m.WorkerQuery,
        response=PaginatedResult[Worker],
    ),
    _r(
        "get_worker",
        "GET",
        f"{P}/workers/{{worker_id}}",
        "One worker or null (get_worker_by_id).",
        response=Worker | None,
    ),
    _r(
        "update_worker",
        "POST",
        f"{P}/workers/{{worker_id}}",
        "Worker heartbeat (update_worker).",
        body=m.UpdateWorkerBody,
        response=Worker,
        mutating=True,
    ),
    # resources
    _r(
        "query_resources",
        "GET",
        f"{P}/resources",
        "Query resources snapshots (query_resources).",
        query=m.ResourcesQuery,
        response=PaginatedResult[ResourcesUpdate],
    ),
    _r(
        "add_resources",
        "POST",
        f"{P}/resources",
        "Store a new resources snapshot (add_resources).",
        body=NamedResources,
        body_required=True,
        response=ResourcesUpdate,
        status=201,
        mutating=True,
    ),
    _r(
        "latest_resources",
        "GET",
        f"{P}/resources/latest",
        "The latest snapshot or null.",
        response=ResourcesUpdate | None,
    ),
    _r(
        "get_resources",
        "GET",
        f"{P}/resources/{{resources_id}}",
        "One snapshot or null.",
        response=ResourcesUpdate | None,
    ),
    _r(
        "update_resources",
        "POST",
        f"{P}/resources/{{resources_id}}",
        "Upsert a snapshot under this id (update_resources).",
        body=NamedResources,
        body_required=True,
        response=ResourcesUpdate,
        mutating=True,
    ),
    # spans
    _r(
        "add_span",
        "POST",
        f"{P}/spans",
        "Store one span; null if it is a duplicate (add_span).",
        body=Span,
        body_required=True,
        response=Span | None,
        status=201,
        mutating=True,
    ),
    _r(
        "query_spans_get",
        "GET",
        f"{P}/spans",
        "Query spans of a rollout (query_spans).",
        query=m.SpanQuery,
        response=PaginatedResult[Span],
    ),
    _r(
        "add_spans",
        "POST",
        f"{P}/spans/batch",
        "Store many spans in one request (add_many_spans).",
        body=m.SpansBatchBody,
        body_required=True,
        response=m.AddSpansResponse,
        status=201,
        mutating=True,
    ),
    _r(
        "query_spans",
        "POST",
        f"{P}/spans/search",
        "Query spans with a JSON body (query_spans).",
        body=m.SpanQuery,
        body_required=True,
        response=PaginatedResult[Span],
    ),
    _r(
        "next_sequence_id",
        "POST",
        f"{P}/spans/next",
        "Issue the next sequence id of a rollout.",
        body=m.NextSequenceIdBody,
        body_required=True,
        response=m.SequenceIdResponse,
        mutating=True,
    ),
    _r(
        "sequence_ids",
        "POST",
        f"{P}/spans/sequence-ids",
        "Issue many sequence ids in one request (get_many_span_sequence_ids).",
        body=m.SequenceIdsBody,
        body_required=True,
        response=m.SequenceIdsResponse,
        mutating=True,
    ),
    # OTLP/HTTP
    _r(
        "otlp_traces",
        "POST",
        OTLP_TRACES_PATH,
        "OTLP/HTTP trace export (protobuf or JSON, optionally gzip). Spans need the resource or span "
        "attributes agentlightning.rollout_id and agentlightning.attempt_id.",
        kind="otlp",
        tag="otlp",
    ),
    _r("otlp_metrics", "POST", "/v1/metrics", "Not implemented (501).", kind="none", tag="otlp"),
    _r("otlp_logs", "POST", "/v1/logs", "Not implemented (501).", kind="none", tag="otlp"),
    _r(
        "otlp_profiles", "POST", "/v1/development/profiles", "Not implemented (501).", kind="none", tag="otlp"
    ),
)
"""Every route the server serves, in registration order."""

_BY_NAME = {route.name: route for route in ROUTES}


def route_by_name(name: str) -> Route:
    """The route with this handler name."""
    return _BY_NAME[name]
