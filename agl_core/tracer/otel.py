"""`OtelTracer`: the default tracer, on the OpenTelemetry SDK, streaming spans to the store.

Design (agl fixes of Agent Lightning 0.3 noted):

* **Every span inside a rollout.** ``init_worker`` builds an SDK ``TracerProvider`` owned by this tracer
  (sampler ALWAYS_ON so training data is never sampled away; a high attribute-count limit) for agl's own
  spans (emitters, agl's LLM-client instrumentation, reached through :mod:`agl_core.tracer.routing`),
  and bridges the **global** provider (:mod:`agl_core.tracer.bridge`): it installs one when the
  application has none, or adds agl's span processor to the application's own -- never replacing it
  (0.3 replaced the global provider). So spans of any other OpenTelemetry instrumentation, started
  inside a rollout, land in that rollout. Opt out with ``global_provider=False`` or
  ``AGL_OTEL_GLOBAL_PROVIDER=0``.
* **Context-local attribution** (quirk 10 in docs/migrating-from-agent-lightning.md). ``trace_context``
  binds ``(rollout_id, attempt_id)`` in a ``contextvars`` variable; the span processor records the
  binding when a span starts and routes the finished span to it, so concurrent runners (threads or
  asyncio tasks) never mix spans.
* **Streaming with a bounded flush.** A background sender on the context's event loop writes finished
  spans in batches (``get_many_span_sequence_ids`` + ``add_many_spans``) without blocking the agent; on
  exit the context waits (at most ``flush_timeout`` seconds) until every span is in the store. Failures
  are logged, counted in ``get_last_export_report()`` and the spans stay in ``get_last_trace()``.
* **One store path.** Spans always go through the store API, also for stores that accept OTLP
  (``capabilities["otlp_traces"]``); the HTTP store batches ``add_many_spans`` into one request.
* **get_last_trace() inside the context** (e.g. in ``on_trace_end``) returns the current rollout's spans
  ended so far (0.3's behaviour; agl before 0.4.1 returned the previous rollout's).
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry import trace as trace_api
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import Status, StatusCode

from agl_core.semconv import LightningResourceAttributes
from agl_core.tracer._binding import TraceBinding, TraceExportReport
from agl_core.tracer._processor import LightningSpanProcessor
from agl_core.tracer.base import Tracer
from agl_core.tracer.bridge import BridgeMode, bridge_global_provider, keep_enabled, span_limits
from agl_core.tracer.logs import bridge_global_logger_provider
from agl_core.types import Attributes, SpanCoreFields, TraceStatus, convert_timestamp
from agl_core.utils.otel import format_exception_attributes

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import Span as SdkSpan

    from agl_core.store.base import LightningStore
    from agl_core.types import Span
    from agl_core.types import StatusCode as AglStatusCode

__all__ = ["OtelSpanRecordingContext", "OtelTracer"]

logger = logging.getLogger(__name__)


def _to_ns(timestamp: float | None) -> int | None:
    """Seconds (or nanoseconds when > 1e12) to integer nanoseconds."""
    if timestamp is None:
        return None
    seconds = convert_timestamp(timestamp)
    assert seconds is not None
    return int(seconds * 1e9)


def _otel_status(status: TraceStatus) -> Status:
    code = StatusCode[status.status_code]
    return Status(code, status.description if code is StatusCode.ERROR else None)


def _core_fields(span: Any) -> SpanCoreFields:
    """:class:`SpanCoreFields` of an SDK span (live or ended); validating a plain dict is the fast path."""
    status = span.status
    attributes = span.attributes
    return SpanCoreFields.model_validate(
        {
            "name": span.name,
            "attributes": dict(attributes) if attributes else {},
            "start_time": convert_timestamp(span.start_time),
            "end_time": convert_timestamp(span.end_time),
            "status": {"status_code": status.status_code.name, "description": status.description},
        }
    )


class OtelSpanRecordingContext:
    """``SpanRecordingContext`` over a live OpenTelemetry span (what ``operation_context`` yields)."""

    def __init__(self, span: SdkSpan) -> None:
        self._span = span

    def record_exception(self, exception: BaseException) -> None:
        """Set the OpenTelemetry exception attributes on the span."""
        self._span.set_attributes(format_exception_attributes(exception))

    def record_attributes(self, attributes: Attributes) -> None:
        """Add attributes to the span."""
        self._span.set_attributes(attributes)

    def record_status(self, code: AglStatusCode, description: str | None = None) -> None:
        """Set the span's status."""
        self._span.set_status(_otel_status(TraceStatus(status_code=code, description=description)))

    def get_recorded_span(self) -> SpanCoreFields:
        """What was recorded so far (final once the block has exited)."""
        return _core_fields(self._span)


class OtelTracer(Tracer):
    """The OpenTelemetry tracer (see the module docstring for the design).

    Args:
        flush_timeout: Seconds ``trace_context`` waits on exit for the store to acknowledge every span.
        batch_size: Most spans written in one ``add_many_spans`` call.
        instrument_llm_clients: Capture ``openai`` client calls as GenAI spans when ``openai`` and
            ``opentelemetry-instrumentation-openai-v2`` are installed (extra ``agl-core[openai]``).
        resource_attributes: Extra OpenTelemetry resource attributes of this tracer's spans.
        global_provider: Bridge the global tracer provider so spans of other OpenTelemetry
            instrumentations inside a rollout are captured (see :mod:`agl_core.tracer.bridge`). None (the
            default) follows ``$AGL_OTEL_GLOBAL_PROVIDER`` (on unless ``0``).
    """

    def __init__(
        self,
        *,
        flush_timeout: float = 30.0,
        batch_size: int = 512,
        instrument_llm_clients: bool = True,
        resource_attributes: dict[str, Any] | None = None,
        global_provider: bool | None = None,
    ) -> None:
        if flush_timeout <= 0:
            raise ValueError(f"flush_timeout must be > 0 seconds, got {flush_timeout!r}.")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size!r}.")
        self.flush_timeout = float(flush_timeout)
        self.batch_size = int(batch_size)
        self.instrument_llm_clients = instrument_llm_clients
        self._resource_attributes = dict(resource_attributes or {})
        self.global_provider = global_provider
        self.bridge_mode: BridgeMode | None = None
        """What the global-provider bridge did at ``init_worker`` (None before)."""
        self._provider: TracerProvider | None = None
        self._otel_tracer: trace_api.Tracer | None = None
        self._instrumented = False
        self._last_binding: TraceBinding | None = None
        self._context_last: contextvars.ContextVar[TraceBinding | None] = contextvars.ContextVar(
            f"agl_otel_last_trace_{id(self)}", default=None
        )
        self._context_open: contextvars.ContextVar[TraceBinding | None] = contextvars.ContextVar(
            f"agl_otel_open_trace_{id(self)}", default=None
        )

    _RUNTIME_FIELDS = (
        "_provider",
        "_otel_tracer",
        "_instrumented",
        "_last_binding",
        "_context_last",
        "_context_open",
    )

    def __getstate__(self) -> dict[str, Any]:
        """Pickle/copy only the configuration: a copy is a fresh, uninitialised tracer."""
        state = {k: v for k, v in self.__dict__.items() if k not in self._RUNTIME_FIELDS}
        state.pop("_store", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._provider = None
        self._otel_tracer = None
        self._instrumented = False
        self._last_binding = None
        self._context_last = contextvars.ContextVar(f"agl_otel_last_trace_{id(self)}", default=None)
        self._context_open = contextvars.ContextVar(f"agl_otel_open_trace_{id(self)}", default=None)

    # ------------------------------------------------------------------ lifecycle

    @property
    def tracer_provider(self) -> TracerProvider | None:
        """This tracer's own SDK provider (None before ``init_worker``); never the global one."""
        return self._provider

    def init_worker(
        self, worker_id: int, store: LightningStore | None = None, *args: Any, **kwargs: Any
    ) -> None:
        """Build the provider and processor, bridge the global provider, instrument LLM clients.

        A second call only updates the store.
        """
        super().init_worker(worker_id, store)
        if self._provider is not None:
            logger.debug("OtelTracer.init_worker called again; keeping the existing provider.")
            return
        resource = Resource.create(
            {
                "service.name": "agl",
                LightningResourceAttributes.TRACER_NAME.value: "otel",
                **self._resource_attributes,
            }
        )
        provider = TracerProvider(resource=resource, sampler=ALWAYS_ON, span_limits=span_limits())
        keep_enabled(provider)
        provider.add_span_processor(LightningSpanProcessor())
        self._provider = provider
        self._otel_tracer = provider.get_tracer("agentlightning")
        self.bridge_mode = bridge_global_provider(self.global_provider)
        bridge_global_logger_provider(self.global_provider)
        if self.instrument_llm_clients:
            from agl_core.instrumentation import instrument_all

            self._instrumented = "openai" in instrument_all(warn_missing=False)

    def teardown_worker(self, worker_id: int, *args: Any, **kwargs: Any) -> None:
        """Undo the LLM-client instrumentation (when it was ours) and shut the provider down."""
        if self._instrumented:
            from agl_core.instrumentation.openai import uninstrument_openai

            uninstrument_openai()
            self._instrumented = False
        provider, self._provider, self._otel_tracer = self._provider, None, None
        if provider is not None:
            provider.shutdown()

    # ------------------------------------------------------------------ tracing

    @asynccontextmanager
    async def _trace_context(
        self,
        name: str | None,
        *,
        store: LightningStore | None,
        rollout_id: str | None,
        attempt_id: str | None,
    ) -> AsyncIterator[trace_api.Tracer]:
        if self._otel_tracer is None:
            raise RuntimeError("LightningSpanProcessor is not initialized. Call init_worker() first.")
        store = store if store is not None else self._store
        if rollout_id is not None and store is None:
            raise ValueError(
                "store is required to be initialized when rollout_id and attempt_id are provided"
            )
        binding = TraceBinding(
            name=name, rollout_id=rollout_id, attempt_id=attempt_id, store=store, batch_size=self.batch_size
        )
        token = binding.open()
        open_token = self._context_open.set(binding)
        try:
            yield self._otel_tracer
        finally:
            self._context_open.reset(open_token)
            await binding.close(token, self.flush_timeout)
            self._last_binding = binding
            self._context_last.set(binding)

    def _last(self) -> TraceBinding | None:
        return self._context_open.get() or self._context_last.get() or self._last_binding

    def get_last_trace(self) -> list[Span]:
        """Spans of the current rollout, in end order.

        Inside ``trace_context`` (e.g. in an ``on_trace_end`` hook): the spans of *this* context that ended
        so far (those still on their way to the store carry provisional sequence ids). After it: the spans
        of the last context exited in this task (else in this tracer).
        """
        open_binding = self._context_open.get()
        if open_binding is not None:
            return open_binding.snapshot()
        binding = self._last()
        return binding.spans() if binding is not None else []

    def get_last_export_report(self) -> TraceExportReport | None:
        """How the last trace's spans reached the store (None before the first ``trace_context``)."""
        binding = self._last()
        return binding.export_report() if binding is not None else None

    def _tracer(self) -> trace_api.Tracer:
        if self._otel_tracer is None:
            raise RuntimeError("LightningSpanProcessor is not initialized. Call init_worker() first.")
        return self._otel_tracer

    def create_span(
        self,
        name: str,
        attributes: dict[str, Any] | None = None,
        timestamp: float | None = None,
        status: TraceStatus | None = None,
    ) -> SpanCoreFields:
        """Start and end a real span at ``timestamp`` (seconds, or nanoseconds if > 1e12) or now."""
        at_ns = _to_ns(timestamp) if timestamp is not None else time.time_ns()
        span = self._tracer().start_span(name, attributes=attributes, start_time=at_ns)
        if status is not None:
            span.set_status(_otel_status(status))
        span.end(end_time=at_ns)
        return _core_fields(span)

    @contextmanager
    def operation_context(
        self,
        name: str,
        attributes: dict[str, Any] | None = None,
        start_time: float | None = None,
        end_time: float | None = None,
    ) -> Iterator[OtelSpanRecordingContext]:
        """A span current for the block; an exception adds exception attributes, sets ERROR and propagates."""
        span = self._tracer().start_span(name, attributes=attributes, start_time=_to_ns(start_time))
        recording = OtelSpanRecordingContext(span)  # type: ignore[arg-type]
        try:
            with trace_api.use_span(
                span, end_on_exit=False, record_exception=False, set_status_on_exception=False
            ):
                yield recording
        except BaseException as exc:
            recording.record_exception(exc)
            recording.record_status("ERROR", str(exc))
            raise
        finally:
            span.end(end_time=_to_ns(end_time))


STORE_WRITE_TIMEOUT_SECONDS = 10.0
"""Agent Lightning 0.3's bound on one store write from the tracer, in seconds (kept for 0.3 code)."""


def to_otel_status_code(status_code: str) -> StatusCode:
    """The OpenTelemetry status code of agl's ``"UNSET"`` / ``"ERROR"`` / ``"OK"`` (anything else: OK)."""
    if status_code == "UNSET":
        return StatusCode.UNSET
    if status_code == "ERROR":
        return StatusCode.ERROR
    return StatusCode.OK
