"""Request handlers of the store API: generic over `agl_core.store.http.routes.ROUTES`.

Every route gets one handler built the same way: parse the route's query model or body type, call the
store (`STORE_CALLS`, one line per route), encode the answer with the route's status. The few routes
that are not a store call (health, the OpenAPI document, the long poll, OTLP) are methods of `StoreApi`
of the route's name. Handlers raise; the server's wrapper turns exceptions into JSON error answers.
Bodies are parsed and validated in one step by pydantic and answers encoded by ``pydantic_core.to_json``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pydantic_core
from aiohttp import web
from pydantic import BaseModel, TypeAdapter, ValidationError

from agl_core.store.base import LightningStore
from agl_core.store.errors import InvalidFilterError, InvalidRequestError
from agl_core.store.http import models as m
from agl_core.store.http.body import read_body
from agl_core.store.http.errors import (
    InvalidJSONError,
    RequestValidationError,
)
from agl_core.store.http.health import StoreProbe
from agl_core.store.http.openapi import openapi_document
from agl_core.store.http.routes import Route
from agl_core.types.queries import AttemptUpdate, RolloutUpdate, StoreQuery

__all__ = ["STORE_CALLS", "StoreApi", "StoreCall", "json_response", "parse_json"]

_JSON = "application/json"


def json_response(payload: Any, status: int = 200) -> web.Response:
    """A JSON answer; `payload` may hold pydantic models.

    An error body ``{"error": {...}}`` also gets Agent Lightning 0.3's ``"detail": <message>`` beside it,
    for raw HTTP clients written against 0.3 (agl's own client reads ``error``).
    """
    if status >= 400 and isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        payload = {**payload, "detail": payload["error"].get("message")}
    return web.Response(body=pydantic_core.to_json(payload), status=status, content_type=_JSON)


@functools.cache
def _adapter(type_: Any) -> TypeAdapter[Any]:
    return TypeAdapter(type_)


def _describe(error: Any) -> str:
    loc = ".".join(str(p) for p in error.get("loc", ())) or "(root)"
    text = f"{loc}: {error.get('msg')}"
    if "input" in error and error.get("type") not in ("missing", "missing_argument", "json_invalid"):
        shown = repr(error["input"])
        text += f" (got {shown[:80] + '...' if len(shown) > 80 else shown})"
    return text


def _validation_error(exc: ValidationError, where: str) -> RequestValidationError:
    errors: list[dict[str, Any]] = [
        dict(e) for e in exc.errors(include_url=False, include_context=False, include_input=False)
    ]
    if any(e.get("type") == "json_invalid" for e in errors):
        return InvalidJSONError(f"The request body is not valid JSON: {errors[0].get('msg')}.", errors)
    parts = [_describe(error) for error in exc.errors(include_url=False, include_context=False)[:5]]
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return RequestValidationError(f"Invalid {where}: " + "; ".join(parts) + more + ".", errors)


def _query_error(exc: ValidationError, where: str) -> InvalidRequestError:
    """The typed error the store raises for the first bad query field (see `models.QueryModel`)."""
    error = exc.errors(include_url=False, include_context=False)[0]
    if error.get("type") == "json_invalid":
        return _validation_error(exc, where)
    loc = error.get("loc") or ("",)
    field = str(loc[0])
    message = f"Invalid {where}: {_describe(error)}."
    if field in ("limit", "offset"):
        return InvalidRequestError(message + " limit must be >= 0 or -1, offset >= 0.")
    if error.get("type") in ("extra_forbidden", "unexpected_keyword_argument"):
        return InvalidFilterError(f"Unknown query option {field!r}; see /v1/agl/openapi.json for the fields.")
    return InvalidFilterError(message)


def parse_json(type_: Any, raw: bytes, where: str = "request body") -> Any:
    """Validate JSON bytes against `type_` (a model or any pydantic-validated type)."""
    try:
        if isinstance(type_, type) and issubclass(type_, BaseModel):
            return type_.model_validate_json(raw)
        return _adapter(type_).validate_json(raw)
    except ValidationError as exc:
        if isinstance(type_, type) and issubclass(type_, (m.QueryModel, StoreQuery)):
            raise _query_error(exc, where) from None
        raise _validation_error(exc, where) from None


def _parse_body(raw: bytes, type_: Any, *, required: bool) -> Any:
    """A request body validated against `type_`; an empty one is ``{}`` unless `required`."""
    if not raw or raw.isspace():
        if required:
            raise RequestValidationError("This route needs a JSON body; the request had none.")
        raw = b"{}"
    return parse_json(type_, raw)


def _fields(model: BaseModel) -> dict[str, Any]:
    """A parsed body's fields as keyword arguments (nested models stay models)."""
    return {name: getattr(model, name) for name in type(model).model_fields}


def _given(model: BaseModel) -> dict[str, Any]:
    """Only the fields the request sent (an update changes those and no others)."""
    return {name: getattr(model, name) for name in model.model_fields_set}


StoreCall = Callable[[LightningStore, Any, Mapping[str, str]], Awaitable[Any]]
"""What a route asks of the store: ``(store, parsed body or query, path parameters) -> answer``."""


async def _enqueue(store: LightningStore, body: m.EnqueueBody, path: Mapping[str, str]) -> Any:
    if len(body.rollouts) != 1:
        return await store.enqueue_many_rollouts(body.rollouts) if body.rollouts else []
    r = body.rollouts[0]
    return [
        await store.enqueue_rollout(
            r.input, mode=r.mode, resources_id=r.resources_id, config=r.config, metadata=r.metadata
        )
    ]


async def _dequeue(store: LightningStore, body: m.DequeueBody, path: Mapping[str, str]) -> Any:
    if body.limit <= 0:
        return []
    if body.limit == 1:
        item = await store.dequeue_rollout(worker_id=body.worker_id)
        return [item] if item is not None else []
    return await store.dequeue_many_rollouts(limit=body.limit, worker_id=body.worker_id)


async def _add_spans(store: LightningStore, body: m.SpansBatchBody, path: Mapping[str, str]) -> Any:
    """The indices (into the request's list) of the spans that were new, and their sequence ids."""
    spans = body.spans
    inserted = await store.add_many_spans(spans) if spans else []
    sequence_ids = [span.sequence_id for span in inserted]
    if len(inserted) == len(spans):
        return {"inserted": list(range(len(spans))), "sequence_ids": sequence_ids}
    position: dict[tuple[str, str, str], int] = {}
    for index, span in enumerate(spans):
        position.setdefault((span.rollout_id, span.attempt_id, span.span_id), index)
    inserted_at = [position[(s.rollout_id, s.attempt_id, s.span_id)] for s in inserted]
    return {"inserted": inserted_at, "sequence_ids": sequence_ids}


async def _sequence_ids(store: LightningStore, body: m.SequenceIdsBody, path: Mapping[str, str]) -> Any:
    pairs = body.rollout_attempt_ids
    return {"sequence_ids": list(await store.get_many_span_sequence_ids(pairs)) if pairs else []}


async def _next_sequence_id(store: LightningStore, b: m.NextSequenceIdBody, path: Mapping[str, str]) -> Any:
    return {"sequence_id": await store.get_next_span_sequence_id(b.rollout_id, b.attempt_id)}


def _query(store: LightningStore, q: Any, path: Mapping[str, str]) -> Awaitable[Any]:
    return store._execute(q)


async def _doctor(store: LightningStore, q: m.DoctorQuery, path: Mapping[str, str]) -> Any:
    from agl_core.adapter.doctor import diagnose_rollout

    return await diagnose_rollout(store, path["rollout_id"], attempt=q.attempt, adapter=q.adapter)


STORE_CALLS: dict[str, StoreCall] = {
    "statistics": lambda s, _, p: s.statistics(),
    "enqueue_rollouts": _enqueue,
    "dequeue_rollouts": _dequeue,
    "start_rollout": lambda s, b, p: s.start_rollout(**_fields(b)),
    "query_rollouts_get": _query,
    "query_rollouts": _query,
    "get_rollout": lambda s, _, p: s.get_rollout_by_id(p["rollout_id"]),
    "update_rollout": lambda s, b, p: s._execute(RolloutUpdate(p["rollout_id"], **_given(b))),
    "start_attempt": lambda s, b, p: s.start_attempt(p["rollout_id"], worker_id=b.worker_id),
    "query_attempts_get": lambda s, q, p: s.query_attempts(p["rollout_id"], **_fields(q)),
    "query_attempts": lambda s, q, p: s.query_attempts(p["rollout_id"], **_fields(q)),
    "latest_attempt": lambda s, _, p: s.get_latest_attempt(p["rollout_id"]),
    "update_attempt": lambda s, b, p: s._execute(
        AttemptUpdate(p["rollout_id"], p["attempt_id"], **_given(b))
    ),
    "query_workers_get": _query,
    "query_workers": _query,
    "get_worker": lambda s, _, p: s.get_worker_by_id(p["worker_id"]),
    "update_worker": lambda s, b, p: s.update_worker(p["worker_id"], **_given(b)),
    "query_resources": lambda s, q, p: s.query_resources(**_fields(q)),
    "add_resources": lambda s, b, p: s.add_resources(b),
    "latest_resources": lambda s, _, p: s.get_latest_resources(),
    "get_resources": lambda s, _, p: s.get_resources_by_id(p["resources_id"]),
    "update_resources": lambda s, b, p: s.update_resources(p["resources_id"], b),
    "rollout_doctor": _doctor,
    "add_span": lambda s, span, p: s.add_span(span),
    "add_spans": _add_spans,
    "query_spans_get": _query,
    "query_spans": _query,
    "next_sequence_id": _next_sequence_id,
    "sequence_ids": _sequence_ids,
}
"""The store call of each plain route (by route name); the other routes are methods of `StoreApi`."""


def _query_params(request: web.Request, model: type[Any]) -> Any:
    """The query string validated against `model` (``*_in`` keys may repeat, others may not)."""
    data: dict[str, Any] = {}
    query = request.query
    for key in query:
        if key in data:
            continue
        values = query.getall(key)
        if key.endswith("_in"):
            data[key] = values
        elif len(values) > 1:
            raise RequestValidationError(
                f"Query parameter {key!r} was given {len(values)} times; give it once."
            )
        else:
            data[key] = values[0]
    try:
        if issubclass(model, BaseModel):
            return model.model_validate(data)
        # mypy does not count a class as Hashable (it reads __hash__ as an unbound method)
        return _adapter(model).validate_python(data)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise _query_error(exc, "query parameters") from None


class StoreApi:
    """The handlers of every route, bound to one store.

    Args:
        store: The store every request goes to.
        max_body_bytes: Size limit of request bodies (and of decompressed OTLP bodies).
        max_wait_seconds: Cap of one ``wait_for_rollouts`` long poll; clients loop for longer waits.
    """

    def __init__(self, store: LightningStore, *, max_body_bytes: int, max_wait_seconds: float) -> None:
        self.store = store
        self.max_body_bytes = max_body_bytes
        self.max_wait_seconds = max_wait_seconds
        self.stopping = asyncio.Event()
        self.probe = StoreProbe()
        self._openapi: bytes | None = None

    def handler(self, route: Route) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        """The aiohttp handler of `route`: parse its query or body, call the store, encode the answer."""
        special = getattr(self, route.name, None)
        if special is not None:
            return special  # type: ignore[no-any-return]
        call = STORE_CALLS[route.name]
        query, body, required, status = route.query, route.body, route.body_required, route.status

        async def handle(request: web.Request) -> web.Response:
            if query is not None:
                args = _query_params(request, query)
            elif body is not None:
                args = _parse_body(await self._raw(request), body, required=required)
            else:
                args = None
            return json_response(await call(self.store, args, request.match_info), status)

        handle.__name__ = route.name
        return handle

    async def _raw(self, request: web.Request) -> bytes:
        return await read_body(request, self.max_body_bytes)

    # ------------------------------------------------------------------------------ not a store call

    async def root_health(self, request: web.Request) -> web.Response:
        """``GET /health``: 200 ``{"status":"ok"}``, or 503 with the reason once the store is unusable.

        A store reports a problem through an optional ``health_problem`` attribute (the SQLite store
        does once it found its file damaged); otherwise one cheap read tells (`health.StoreProbe`).
        """
        problem = getattr(self.store, "health_problem", None) or await self.probe.problem(self.store)
        if problem:
            return json_response({"status": "unhealthy", "reason": str(problem)}, 503)
        return web.Response(body=b'{"status":"ok"}', content_type=_JSON)

    health = root_health

    async def openapi(self, request: web.Request) -> web.Response:
        """``GET /v1/agl/openapi.json``."""
        if self._openapi is None:
            self._openapi = pydantic_core.to_json(openapi_document())
        return web.Response(body=self._openapi, content_type=_JSON)

    async def wait_rollouts(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/waits/rollouts``: one long poll, capped at ``max_wait_seconds``.

        A server that is shutting down answers at once with the rollouts finished so far.
        """
        b: m.WaitBody = _parse_body(await self._raw(request), m.WaitBody, required=True)
        wait = self.max_wait_seconds if b.timeout is None else min(b.timeout, self.max_wait_seconds)
        if wait <= 0 or self.stopping.is_set():
            return json_response(await self.store.wait_for_rollouts(rollout_ids=b.rollout_ids, timeout=0))
        waiter = asyncio.ensure_future(self.store.wait_for_rollouts(rollout_ids=b.rollout_ids, timeout=wait))
        stopper = asyncio.ensure_future(self.stopping.wait())
        try:
            await asyncio.wait((waiter, stopper), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
            if not waiter.done():
                waiter.cancel()
        if not waiter.cancelled() and waiter.done():
            return json_response(waiter.result())
        return json_response(await self.store.wait_for_rollouts(rollout_ids=b.rollout_ids, timeout=0))

    async def otlp_traces(self, request: web.Request) -> web.Response:
        """``POST /v1/traces``: OTLP/HTTP export (see `agl_core.store.http.otlp`)."""
        from agl_core.store.http import otlp

        raw = await self._raw(request)
        decoded, as_json = otlp.decode_traces(raw, request.headers.get("Content-Type", ""))
        result = await otlp.ingest_spans(self.store, decoded)
        body = otlp.encode_traces_response(result, as_json)
        return web.Response(body=body, content_type=_JSON if as_json else "application/x-protobuf")

    async def _not_implemented(self, request: web.Request) -> web.Response:
        signal = request.path.rsplit("/", 1)[-1]
        return json_response(
            {
                "error": {
                    "type": "NotImplemented",
                    "message": f"OTLP {signal} are not supported by the agl store; only traces (/v1/traces).",
                    "details": {},
                }
            },
            501,
        )

    otlp_metrics = _not_implemented
    otlp_logs = _not_implemented
    otlp_profiles = _not_implemented
