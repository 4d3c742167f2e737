"""`WeaveTracer`: the Weave ops and calls of a rollout become spans in the agl store (0.3's tracer).

``init_worker`` instruments Weave (:mod:`agl_weave.instrumentation`) with a trace server of this tracer
and calls ``weave.init``; nothing goes to W&B. ``trace_context`` opens a root Weave call whose inputs are
the rollout and attempt ids; every Weave call of that trace -- ``@weave.op`` functions, the integrations
Weave patches (OpenAI, Anthropic, LiteLLM, ...), ``create_span``/``operation_context`` -- becomes one
:class:`~agl_core.types.Span` when it completes:

* ``name``: the function name (from the op reference ``weave:///.../op/<name>:<digest>``);
* ``span_id``/``trace_id``/``parent_id``: the Weave call's ids, so nested calls are child spans;
* attributes: ``agentlightning.operation.name`` (the op reference), the call's attributes,
  ``agentlightning.operation.input.*`` / ``.output.*`` (flattened), the call's summary;
* an exception: status ERROR with its message, and the OpenTelemetry ``exception.type``/``.message``/
  ``.stacktrace`` attributes;
* the resource carries ``agentlightning.rollout_id``/``attempt_id``/``span_sequence_id`` and
  ``agentlightning.tracer.name = "weave"``.

Each call gets its sequence id from the store when it starts (start order); the span is written with
``store.add_span`` when it ends. On exit ``trace_context`` flushes Weave and waits (at most
``flush_timeout`` seconds) until every span is in the store.

Differences from Agent Lightning 0.3 (on purpose): calls are attributed by their Weave trace, so several
``trace_context`` blocks may run at once in one process (0.3 kept one rollout per tracer); a child's
``parent`` context is always set (0.3 set it only when the parent had already ended, which it rarely
has); exceptions get the OpenTelemetry exception attributes (0.3 stored Weave's JSON dump as the
message); inputs recorded in ``operation_context`` after Weave sent the call's start are kept (0.3 lost
them); a falsy output (``0``, ``""``) is recorded; completed calls are not kept in the trace server (0.3's
grew for the life of the process); workers of one process share Weave's one client (0.3's second
``init_worker`` in a process re-instrumented Weave over the first).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import copy
import json
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import weave
from opentelemetry.semconv.attributes import exception_attributes
from weave.trace.settings import UserSettings

from agl_core.semconv import LightningResourceAttributes, LightningSpanAttributes
from agl_core.tracer.base import Tracer
from agl_core.tracer.weave import op_name_to_func_name
from agl_core.types import OtelResource, Span, SpanContext, SpanCoreFields, TraceStatus
from agl_core.utils.otel import flatten_attributes, sanitize_attributes
from agl_weave.recording import LATE_INPUTS_KEY, WeaveSpanRecordingContext
from agl_weave.routing import WeaveTracerManagedTraceServer, client_uses, get_router

if TYPE_CHECKING:
    from weave.trace.call import Call as LiveCall
    from weave.trace.weave_client import WeaveClient
    from weave.vendor.weave_server_sdk.types.call_read_response import Call

    from agl_core.store.base import LightningStore

__all__ = ["WeaveTracer", "WeaveTracerManagedTraceServer"]

logger = logging.getLogger(__name__)

TRACER_NAME = "weave"
"""The ``agentlightning.tracer.name`` resource attribute of this tracer's spans."""

DUMMY_ROLLOUT_ID = "rollout-dummy"
DUMMY_ATTEMPT_ID = "attempt-dummy"


@dataclass
class _Rollout:
    """One open ``trace_context``: where its Weave trace's calls go (a ``CallSink``)."""

    tracer: WeaveTracer
    rollout_id: str | None
    attempt_id: str | None
    store: LightningStore | None
    loop: asyncio.AbstractEventLoop
    spans: list[Span] = field(default_factory=list)
    sequence_ids: dict[str, concurrent.futures.Future[int]] = field(default_factory=dict)
    pending: list[concurrent.futures.Future[None]] = field(default_factory=list)
    completed: set[str] = field(default_factory=set)
    counter: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def bound(self) -> bool:
        """Whether spans go to a store (ids and a store given)."""
        return self.store is not None and self.rollout_id is not None and self.attempt_id is not None

    def call_started(self, call_id: str) -> None:
        """Ask for the call's sequence id now, so ids follow the order calls start in."""
        with self.lock:
            self._allocate(call_id)

    def _allocate(self, call_id: str) -> None:
        # A start notice may arrive after its call completed (the server notifies outside its lock).
        if call_id not in self.sequence_ids and call_id not in self.completed:
            self.sequence_ids[call_id] = asyncio.run_coroutine_threadsafe(self._next_sequence_id(), self.loop)

    def call_completed(self, call: Call) -> None:
        """Record the call as a span (on the rollout's event loop)."""
        with self.lock:
            if call.id in self.completed:
                return
            self._allocate(call.id)
            self.completed.add(call.id)
            sequence_id = self.sequence_ids.pop(call.id)
            self.pending.append(asyncio.run_coroutine_threadsafe(self._record(call, sequence_id), self.loop))

    async def _next_sequence_id(self) -> int:
        if self.bound:
            assert self.store is not None and self.rollout_id is not None and self.attempt_id is not None
            return await self.store.get_next_span_sequence_id(self.rollout_id, self.attempt_id)
        self.counter += 1
        return self.counter

    async def _record(self, call: Call, sequence_future: concurrent.futures.Future[int]) -> None:
        sequence_id: int = await asyncio.wrap_future(sequence_future)
        span = await self.tracer.convert_call_to_span(call, self.rollout_id, self.attempt_id, sequence_id)
        self.spans.append(span)
        if self.bound:
            assert self.store is not None
            await self.store.add_span(span)

    async def wait(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) until every completed call is recorded; log what is not."""
        with self.lock:
            pending = list(self.pending)
        if not pending:
            return
        done, not_done = await asyncio.wait([asyncio.wrap_future(f) for f in pending], timeout=timeout)
        if not_done:
            logger.error(
                "%d Weave span(s) of rollout %s did not reach the store within %.1f s.",
                len(not_done),
                self.rollout_id,
                timeout,
            )
        for task in done:
            if task.exception() is not None:
                logger.error(
                    "Recording a Weave span of rollout %s failed: %r", self.rollout_id, task.exception()
                )


_CURRENT: contextvars.ContextVar[_Rollout | None] = contextvars.ContextVar("agl_weave_rollout", default=None)


def _exception_attributes(exception: str) -> dict[str, Any]:
    """OpenTelemetry exception attributes from Weave's exception string (a JSON dump, or plain text)."""
    try:
        parsed = json.loads(exception)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or "message" not in parsed:
        return {exception_attributes.EXCEPTION_MESSAGE: exception}
    attributes: dict[str, Any] = {
        exception_attributes.EXCEPTION_TYPE: str(parsed.get("type", "")),
        exception_attributes.EXCEPTION_MESSAGE: str(parsed["message"]),
    }
    frames = parsed.get("traceback") or []
    if frames:
        lines = ["Traceback (most recent call last):"]
        for frame in frames:
            where = f'"{frame.get("filename")}", line {frame.get("line_number")}'
            lines.append(f"  File {where}, in {frame.get('function_name')}")
            if frame.get("text"):
                lines.append(f"    {frame['text']}")
        lines.append(f"{parsed.get('type')}: {parsed['message']}")
        attributes[exception_attributes.EXCEPTION_STACKTRACE] = "\n".join(lines)
    return attributes


class WeaveTracer(Tracer):
    """Tracer on W&B Weave: the Weave calls of a rollout as spans in the agl store (see the module docstring).

    Args:
        project_name: Weave project (``"project"`` or ``"entity/project"``); default ``agl/weave-<random>``.
            Weave has one client per process: workers of one process share the first worker's project.
        weave_user_settings: Weave's ``UserSettings``; default ``UserSettings(use_server_cache=False,
            print_call_link=False)``.
        instrument_managed: instrument Weave (offline, in-memory trace server) when the first worker of the
            process starts and restore it when the last one stops. With False, call
            ``tracer.instrument(worker_id)`` yourself before ``init_worker``.
        flush_timeout: seconds ``trace_context`` waits on exit for every span to reach the store.
    """

    def __init__(
        self,
        *,
        project_name: str | None = None,
        weave_user_settings: UserSettings | None = None,
        instrument_managed: bool = True,
        flush_timeout: float = 30.0,
    ) -> None:
        super().__init__()
        if not flush_timeout > 0:
            raise ValueError(f"flush_timeout must be > 0 seconds, got {flush_timeout!r}.")
        self.project_name = project_name
        self.instrument_managed = instrument_managed
        self.weave_user_settings = weave_user_settings or UserSettings(
            use_server_cache=False, print_call_link=False
        )
        self.flush_timeout = float(flush_timeout)
        self._last: _Rollout | None = None
        self._started_workers: set[int] = set()

    def __deepcopy__(self, memo: dict[int, Any]) -> WeaveTracer:
        """A fresh tracer with the same settings (what each runner worker gets)."""
        return WeaveTracer(
            project_name=self.project_name,
            weave_user_settings=copy.deepcopy(self.weave_user_settings, memo),
            instrument_managed=self.instrument_managed,
            flush_timeout=self.flush_timeout,
        )

    def __getstate__(self) -> dict[str, Any]:
        """Picklable settings (for runner processes); traces and workers stay behind."""
        state = dict(self.__dict__)
        state.update(_last=None, _started_workers=set(), _store=None)
        return state

    @property
    def server(self) -> WeaveTracerManagedTraceServer:
        """The in-memory trace server Weave writes to (one per process, shared by every WeaveTracer)."""
        return get_router().server

    @property
    def _server(self) -> WeaveTracerManagedTraceServer:  # Agent Lightning 0.3's attribute
        return self.server

    # -- lifecycle -------------------------------------------------------------------------------

    def instrument(self, worker_id: int) -> None:
        """Make ``weave.init`` use the managed server, offline (:func:`~agl_weave.instrument_weave`)."""
        get_router().instrument()

    def uninstrument(self, worker_id: int) -> None:
        """Undo :meth:`instrument`."""
        get_router().uninstrument()

    def init_worker(
        self, worker_id: int, store: LightningStore | None = None, *args: Any, **kwargs: Any
    ) -> None:
        """Start Weave for this worker (see ``instrument_managed``); spans of its rollouts go to ``store``.

        Raises ``RuntimeError`` when ``weave.init`` fails.
        """
        super().init_worker(worker_id, store)
        self.project_name = get_router().acquire(
            self.project_name, self.weave_user_settings, instrument=self.instrument_managed
        )
        self._started_workers.add(worker_id)
        logger.info("[Worker %s] Weave tracer ready (project %s).", worker_id, self.project_name)

    def teardown_worker(self, worker_id: int, *args: Any, **kwargs: Any) -> None:
        """Stop this worker; the process's last one ends the Weave client and restores Weave."""
        if worker_id in self._started_workers:
            self._started_workers.discard(worker_id)
            get_router().release(uninstrument=self.instrument_managed)
        super().teardown_worker(worker_id)

    def _get_weave_client(self) -> WeaveClient:
        client = weave.get_client()
        if client is None:
            raise RuntimeError(
                "The Weave client is not initialized; call tracer.init_worker(worker_id) first."
            )
        return client

    # -- trace context ---------------------------------------------------------------------------

    @asynccontextmanager
    async def _trace_context(
        self,
        name: str | None,
        *,
        store: LightningStore | None,
        rollout_id: str | None,
        attempt_id: str | None,
    ) -> AsyncIterator[LiveCall]:
        client = self._get_weave_client()
        router = get_router()
        if not client_uses(client, router.server):
            logger.error(
                "The Weave client does not write to agl's trace server (weave.init called after "
                "init_worker?); the calls of this rollout are not recorded."
            )
        rollout = _Rollout(self, rollout_id, attempt_id, store or self._store, asyncio.get_running_loop())
        inputs: dict[str, str] = {}
        if rollout_id is not None and attempt_id is not None:
            inputs = {
                LightningResourceAttributes.ROLLOUT_ID.value: rollout_id,
                LightningResourceAttributes.ATTEMPT_ID.value: attempt_id,
            }
        else:
            logger.debug("trace_context without rollout_id/attempt_id: spans are kept locally only.")
        root = client.create_call(op=name or client.project, inputs=inputs)
        router.open_trace(root.trace_id, rollout)
        rollout.call_started(str(root.id))  # the root call's start may have reached the server already
        token = _CURRENT.set(rollout)
        try:
            try:
                yield root
            except BaseException as exc:
                client.finish_call(root, exception=exc)
                raise
            else:
                client.finish_call(root)
        finally:
            try:
                await asyncio.to_thread(client.flush)
                await rollout.wait(self.flush_timeout)
            finally:
                router.close_trace(root.trace_id)
                self._last = rollout
                _CURRENT.reset(token)

    def get_last_trace(self) -> list[Span]:
        """The spans of the current ``trace_context`` so far, or of the last one that ended."""
        rollout = _CURRENT.get() or self._last
        return list(rollout.spans) if rollout is not None else []

    # -- calls -> spans --------------------------------------------------------------------------

    async def convert_call_to_span(
        self,
        call: Call,
        rollout_id: str | None = None,
        attempt_id: str | None = None,
        sequence_id: int | None = None,
    ) -> Span:
        """The :class:`Span` of a completed Weave call (see the module docstring for the mapping)."""
        rollout_id = rollout_id or DUMMY_ROLLOUT_ID
        attempt_id = attempt_id or DUMMY_ATTEMPT_ID
        sequence_id = sequence_id or 0
        attributes: dict[str, Any] = {
            LightningSpanAttributes.OPERATION_NAME.value: call.op_name,
            **(call.attributes or {}),
        }
        summary = dict(call.summary or {})
        late_inputs = summary.pop(LATE_INPUTS_KEY, None)
        inputs = {**call.inputs, **late_inputs} if isinstance(late_inputs, dict) else call.inputs
        if inputs:
            attributes[LightningSpanAttributes.OPERATION_INPUT.value] = inputs
        if call.output is not None:
            attributes[LightningSpanAttributes.OPERATION_OUTPUT.value] = call.output
        attributes.update(summary)
        if call.exception:
            attributes.update(_exception_attributes(call.exception))
            message = attributes.get(exception_attributes.EXCEPTION_MESSAGE, call.exception)
            status = TraceStatus(status_code="ERROR", description=str(message))
        else:
            status = TraceStatus(status_code="OK")
        context = SpanContext(trace_id=call.trace_id, span_id=call.id, is_remote=False, trace_state={})
        parent = (
            SpanContext(trace_id=call.trace_id, span_id=call.parent_id, is_remote=False, trace_state={})
            if call.parent_id
            else None
        )
        return Span(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            sequence_id=sequence_id,
            trace_id=call.trace_id,
            span_id=call.id,
            parent_id=call.parent_id,
            name=op_name_to_func_name(call.op_name),
            status=status,
            attributes=sanitize_attributes(flatten_attributes(attributes)),
            events=[],
            links=[],
            start_time=call.started_at.timestamp(),
            end_time=call.ended_at.timestamp() if call.ended_at else None,
            context=context,
            parent=parent,
            resource=OtelResource(
                attributes={
                    LightningResourceAttributes.ROLLOUT_ID.value: rollout_id,
                    LightningResourceAttributes.ATTEMPT_ID.value: attempt_id,
                    LightningResourceAttributes.SPAN_SEQUENCE_ID.value: sequence_id,
                    LightningResourceAttributes.TRACER_NAME.value: TRACER_NAME,
                },
                schema_url="",
            ),
        )

    # -- emitters --------------------------------------------------------------------------------

    def create_span(
        self,
        name: str,
        attributes: dict[str, Any] | None = None,
        timestamp: float | None = None,
        status: TraceStatus | None = None,
    ) -> SpanCoreFields:
        """Record a Weave call ``name`` that ends at once; Weave cannot take ``timestamp`` (ignored)."""
        if timestamp is not None:
            logger.warning("Weave calls cannot start at a given time; timestamp=%r is ignored.", timestamp)
        client = self._get_weave_client()
        recording = WeaveSpanRecordingContext(client.create_call(op=name, inputs={}, attributes=attributes))
        if status is not None and status.status_code == "ERROR":
            recording.record_status("ERROR", status.description or "error")
        recording.finish(client)
        return recording.get_recorded_span()

    @contextmanager
    def operation_context(
        self,
        name: str,
        attributes: dict[str, Any] | None = None,
        start_time: float | None = None,
        end_time: float | None = None,
    ) -> Iterator[WeaveSpanRecordingContext]:
        """A Weave call around the block; an exception marks it ERROR and propagates.

        Weave sets start and end times itself: ``start_time``/``end_time`` are ignored (logged).
        """
        if start_time is not None or end_time is not None:
            logger.warning("Weave calls cannot take given start/end times; they are ignored.")
        client = self._get_weave_client()
        recording = WeaveSpanRecordingContext(client.create_call(op=name, inputs={}, attributes=attributes))
        try:
            yield recording
        except BaseException as exc:
            recording.record_exception(exc)
            recording.finish(client, exc)
            raise
        recording.finish(client)
