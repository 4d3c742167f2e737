"""Request handlers of the store API: parse and validate, call the store, encode the answer.

One method per route of `agl_core.store.http.routes.ROUTES` (same name). Handlers raise; the server's
wrapper turns exceptions into JSON error answers. Bodies are parsed and validated in one step by
pydantic (``model_validate_json``) and answers encoded by ``pydantic_core.to_json``, both in Rust.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
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
from agl_core.types import NamedResources, Span
from agl_core.types.queries import AttemptUpdate, RolloutUpdate, StoreQuery

__all__ = ["StoreApi", "json_response", "parse_json"]

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

    # ------------------------------------------------------------------------------ helpers

    async def _raw(self, request: web.Request) -> bytes:
        return await read_body(request, self.max_body_bytes)

    async def _body(self, request: web.Request, type_: Any, *, required: bool) -> Any:
        return _parse_body(await self._raw(request), type_, required=required)

    @staticmethod
    def _query(request: web.Request, model: type[Any]) -> Any:
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

    # ------------------------------------------------------------------------------ meta

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

    async def statistics(self, request: web.Request) -> web.Response:
        """``GET /v1/agl/statistics``."""
        return json_response(await self.store.statistics())

    # ------------------------------------------------------------------------------ queue

    async def enqueue_rollouts(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/queues/rollouts/enqueue``."""
        body: m.EnqueueBody = await self._body(request, m.EnqueueBody, required=True)
        if len(body.rollouts) == 1:
            r = body.rollouts[0]
            result: Sequence[Any] = [
                await self.store.enqueue_rollout(
                    r.input, mode=r.mode, resources_id=r.resources_id, config=r.config, metadata=r.metadata
                )
            ]
        elif body.rollouts:
            result = await self.store.enqueue_many_rollouts(body.rollouts)
        else:
            result = []
        return json_response(result, 201)

    async def dequeue_rollouts(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/queues/rollouts/dequeue``."""
        body: m.DequeueBody = await self._body(request, m.DequeueBody, required=False)
        if body.limit <= 0:
            return json_response([])
        if body.limit == 1:
            item = await self.store.dequeue_rollout(worker_id=body.worker_id)
            return json_response([item] if item is not None else [])
        return json_response(
            await self.store.dequeue_many_rollouts(limit=body.limit, worker_id=body.worker_id)
        )

    # ------------------------------------------------------------------------------ rollouts

    async def start_rollout(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/rollouts``."""
        b: m.StartRolloutBody = await self._body(request, m.StartRolloutBody, required=True)
        result = await self.store.start_rollout(
            b.input,
            mode=b.mode,
            resources_id=b.resources_id,
            config=b.config,
            metadata=b.metadata,
            worker_id=b.worker_id,
        )
        return json_response(result, 201)

    async def _query_rollouts(self, q: m.RolloutQuery) -> web.Response:
        return json_response(await self.store._execute(q))

    async def query_rollouts_get(self, request: web.Request) -> web.Response:
        """``GET /v1/agl/rollouts``."""
        return await self._query_rollouts(self._query(request, m.RolloutQuery))

    async def query_rollouts(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/rollouts/search``."""
        return await self._query_rollouts(await self._body(request, m.RolloutQuery, required=False))

    async def get_rollout(self, request: web.Request) -> web.Response:
        """``GET /v1/agl/rollouts/{rollout_id}``."""
        return json_response(await self.store.get_rollout_by_id(request.match_info["rollout_id"]))

    async def update_rollout(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/rollouts/{rollout_id}``: only the fields in the body are changed."""
        b: m.UpdateRolloutBody = await self._body(request, m.UpdateRolloutBody, required=False)
        changes = {name: getattr(b, name) for name in b.model_fields_set}
        update = RolloutUpdate(request.match_info["rollout_id"], **changes)
        return json_response(await self.store._execute(update))

    async def start_attempt(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/rollouts/{rollout_id}/attempts``."""
        b: m.StartAttemptBody = await self._body(request, m.StartAttemptBody, required=False)
        result = await self.store.start_attempt(request.match_info["rollout_id"], worker_id=b.worker_id)
        return json_response(result, 201)

    async def _query_attempts(self, request: web.Request, q: m.AttemptQuery) -> web.Response:
        result = await self.store.query_attempts(
            request.match_info["rollout_id"],
            sort_by=q.sort_by,
            sort_order=q.sort_order,
            limit=q.limit,
            offset=q.offset,
        )
        return json_response(result)

    async def query_attempts_get(self, request: web.Request) -> web.Response:
        """``GET /v1/agl/rollouts/{rollout_id}/attempts``."""
        return await self._query_attempts(request, self._query(request, m.AttemptQuery))

    async def query_attempts(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/rollouts/{rollout_id}/attempts/search``."""
        return await self._query_attempts(request, await self._body(request, m.AttemptQuery, required=False))

    async def latest_attempt(self, request: web.Request) -> web.Response:
        """``GET /v1/agl/rollouts/{rollout_id}/attempts/latest``."""
        return json_response(await self.store.get_latest_attempt(request.match_info["rollout_id"]))

    async def update_attempt(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/rollouts/{rollout_id}/attempts/{attempt_id}``: only the fields in the body."""
        b: m.UpdateAttemptBody = await self._body(request, m.UpdateAttemptBody, required=False)
        changes = {name: getattr(b, name) for name in b.model_fields_set}
        info = request.match_info
        update = AttemptUpdate(info["rollout_id"], info["attempt_id"], **changes)
        return json_response(await self.store._execute(update))

    async def rollout_doctor(self, request: web.Request) -> web.Response:
        """``GET /v1/agl/rollouts/{rollout_id}/doctor``: `agl_core.adapter.doctor.diagnose_rollout`."""
        from agl_core.adapter.doctor import diagnose_rollout

        q: m.DoctorQuery = self._query(request, m.DoctorQuery)
        report = await diagnose_rollout(
            self.store, request.match_info["rollout_id"], attempt=q.attempt, adapter=q.adapter
        )
        return json_response(report)

    async def wait_rollouts(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/waits/rollouts``: one long poll, capped at ``max_wait_seconds``.

        A server that is shutting down answers at once with the rollouts finished so far.
        """
        b: m.WaitBody = await self._body(request, m.WaitBody, required=True)
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

    # ------------------------------------------------------------------------------ workers

    async def _query_workers(self, q: m.WorkerQuery) -> web.Response:
        return json_response(await self.store._execute(q))

    async def query_workers_get(self, request: web.Request) -> web.Response:
        """``GET /v1/agl/workers``."""
        return await self._query_workers(self._query(request, m.WorkerQuery))

    async def query_workers(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/workers/search``."""
        return await self._query_workers(await self._body(request, m.WorkerQuery, required=False))

    async def get_worker(self, request: web.Request) -> web.Response:
        """``GET /v1/agl/workers/{worker_id}``."""
        return json_response(await self.store.get_worker_by_id(request.match_info["worker_id"]))

    async def update_worker(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/workers/{worker_id}``."""
        b: m.UpdateWorkerBody = await self._body(request, m.UpdateWorkerBody, required=False)
        changes = {name: getattr(b, name) for name in b.model_fields_set}
        return json_response(await self.store.update_worker(request.match_info["worker_id"], **changes))

    # ------------------------------------------------------------------------------ resources

    async def query_resources(self, request: web.Request) -> web.Response:
        """``GET /v1/agl/resources``."""
        q: m.ResourcesQuery = self._query(request, m.ResourcesQuery)
        result = await self.store.query_resources(
            resources_id=q.resources_id,
            resources_id_contains=q.resources_id_contains,
            sort_by=q.sort_by,
            sort_order=q.sort_order,
            limit=q.limit,
            offset=q.offset,
        )
        return json_response(result)

    async def add_resources(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/resources``."""
        resources = await self._body(request, NamedResources, required=True)
        return json_response(await self.store.add_resources(resources), 201)

    async def latest_resources(self, request: web.Request) -> web.Response:
        """``GET /v1/agl/resources/latest``."""
        return json_response(await self.store.get_latest_resources())

    async def get_resources(self, request: web.Request) -> web.Response:
        """``GET /v1/agl/resources/{resources_id}``."""
        return json_response(await self.store.get_resources_by_id(request.match_info["resources_id"]))

    async def update_resources(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/resources/{resources_id}``."""
        resources = await self._body(request, NamedResources, required=True)
        return json_response(await self.store.update_resources(request.match_info["resources_id"], resources))

    # ------------------------------------------------------------------------------ spans

    async def add_span(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/spans``."""
        span = await self._body(request, Span, required=True)
        return json_response(await self.store.add_span(span), 201)

    async def add_spans(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/spans/batch``: answers the indices of the spans that were new."""
        body: m.SpansBatchBody = await self._body(request, m.SpansBatchBody, required=True)
        spans = body.spans
        if not spans:
            return web.Response(body=b'{"inserted":[]}', status=201, content_type=_JSON)
        inserted = await self.store.add_many_spans(spans)
        if len(inserted) == len(spans):
            indices: list[int] = list(range(len(spans)))
        else:
            position: dict[tuple[str, str, str], int] = {}
            for index, span in enumerate(spans):
                position.setdefault((span.rollout_id, span.attempt_id, span.span_id), index)
            indices = [position[(s.rollout_id, s.attempt_id, s.span_id)] for s in inserted]
        return json_response({"inserted": indices}, 201)

    async def query_spans_get(self, request: web.Request) -> web.Response:
        """``GET /v1/agl/spans``."""
        return json_response(await self.store._execute(self._query(request, m.SpanQuery)))

    async def query_spans(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/spans/search``."""
        return json_response(await self.store._execute(await self._body(request, m.SpanQuery, required=True)))

    async def next_sequence_id(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/spans/next``."""
        b: m.NextSequenceIdBody = await self._body(request, m.NextSequenceIdBody, required=True)
        return json_response(
            {"sequence_id": await self.store.get_next_span_sequence_id(b.rollout_id, b.attempt_id)}
        )

    async def sequence_ids(self, request: web.Request) -> web.Response:
        """``POST /v1/agl/spans/sequence-ids``."""
        b: m.SequenceIdsBody = await self._body(request, m.SequenceIdsBody, required=True)
        ids = (
            await self.store.get_many_span_sequence_ids(b.rollout_attempt_ids)
            if b.rollout_attempt_ids
            else []
        )
        return json_response({"sequence_ids": list(ids)})

    # ------------------------------------------------------------------------------ OTLP

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
