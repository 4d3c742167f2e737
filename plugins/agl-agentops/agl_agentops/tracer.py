"""`AgentOpsTracer`: the agent is instrumented by the AgentOps SDK, its spans go to the agl store.

Built on :class:`agl_core.tracer.OtelTracer`, whose machinery it reuses unchanged: a provider of its own,
context-local trace bindings (the span processor records the binding current when a span starts and
routes the finished span to it), a background sender writing batches with bulk sequence ids, a bounded
flush when ``trace_context`` exits, ``get_last_trace()`` and ``get_last_export_report()``.

What AgentOps adds: its instrumentation of OpenAI, Anthropic, LangChain, CrewAI, ... (see
:mod:`agl_agentops.runtime` for how its spans reach this tracer) and an AgentOps trace (session span,
``{name}.session``) around every ``trace_context``. :mod:`agl_agentops.token_ids` adds token ids to its
OpenAI chat spans.

Nothing is sent to AgentOps unless ``send_to_agentops=True`` *and* an API key is configured. Then this
tracer's spans are also exported by a ``BatchSpanProcessor`` (bounded queue, timeouts) with agl's
exporter (:mod:`agl_agentops.exporter`; AgentOps' own is broken on OpenTelemetry >= 1.45, see
:mod:`agl_agentops.compat`), and AgentOps' captured ``print`` log is uploaded per trace -- both on
background threads: an unreachable or hanging AgentOps neither slows nor fails a rollout, and the agl
store path never depends on it.

Agent Lightning 0.3 differences (on purpose): AgentOps' network paths are disabled, not bypassed with a
dummy key; the store path is the core tracer's (context-local, batched) instead of one blocking store
call per span; with ids the store may be the ``init_worker`` one (0.3 required passing all three).
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace.export import BatchSpanProcessor

from agl_agentops.compat import ExporterProbe, probe_agentops_exporter
from agl_agentops.exporter import AgentOpsAuth, AgentOpsExportStats, AgentOpsSpanExporter
from agl_agentops.logs import LogUploadProcessor
from agl_agentops.runtime import Mode, adopt_agentops, ensure_agentops
from agl_agentops.token_ids import instrument_token_ids, uninstrument_token_ids
from agl_core.semconv import LightningResourceAttributes
from agl_core.tracer import OtelTracer

if TYPE_CHECKING:
    from opentelemetry import trace as trace_api

    from agl_core.store.base import LightningStore

__all__ = ["DEFAULT_API_ENDPOINT", "DEFAULT_EXPORTER_ENDPOINT", "AgentOpsTracer"]

logger = logging.getLogger("agl_core.tracer.agentops.tracer")

DEFAULT_API_ENDPOINT = "https://api.agentops.ai"
DEFAULT_EXPORTER_ENDPOINT = "https://otlp.agentops.ai/v1/traces"
API_KEY_ENV = "AGENTOPS_API_KEY"
API_ENDPOINT_ENV = "AGENTOPS_API_ENDPOINT"
EXPORTER_ENDPOINT_ENV = "AGENTOPS_EXPORTER_ENDPOINT"


def _positive(name: str, value: float) -> float:
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}.")
    return float(value)


class AgentOpsTracer(OtelTracer):
    """Tracer on the AgentOps SDK: everything AgentOps instruments, in the agl store of the current attempt.

    Args:
        agentops_managed: agl initializes AgentOps (with its network paths off) if nobody did; when False,
            the application must have called ``agentops.init`` and owns AgentOps' export.
        instrument_managed: add token ids to AgentOps' OpenAI chat spans while this tracer's worker runs.
        api_key: AgentOps API key (default: ``$AGENTOPS_API_KEY``); used only with ``send_to_agentops``.
        endpoint: AgentOps API URL (default: ``$AGENTOPS_API_ENDPOINT`` or the AgentOps cloud).
        exporter_endpoint: OTLP traces URL (default: ``$AGENTOPS_EXPORTER_ENDPOINT`` or the AgentOps cloud).
        send_to_agentops: also send this tracer's spans (and AgentOps' captured log) to AgentOps. Needs an
            API key and ``agentops_managed=True``.
        export_timeout: seconds one export, auth or log request may take (retries included).
        export_queue_size: spans waiting for AgentOps at most; beyond that new ones are dropped (logged).
        export_batch_size: spans per OTLP request.
        export_interval: seconds between background exports.
        daemon: accepted for compatibility with Agent Lightning 0.3; ignored.
        flush_timeout, batch_size, resource_attributes: see :class:`agl_core.tracer.OtelTracer`.
    """

    def __init__(
        self,
        *,
        agentops_managed: bool = True,
        instrument_managed: bool = True,
        api_key: str | None = None,
        endpoint: str | None = None,
        exporter_endpoint: str | None = None,
        send_to_agentops: bool = False,
        export_timeout: float = 10.0,
        export_queue_size: int = 2048,
        export_batch_size: int = 512,
        export_interval: float = 1.0,
        daemon: bool = True,
        flush_timeout: float = 30.0,
        batch_size: int = 512,
        resource_attributes: dict[str, Any] | None = None,
    ) -> None:
        if send_to_agentops and not agentops_managed:
            raise ValueError(
                "send_to_agentops=True needs agentops_managed=True; with agentops_managed=False AgentOps' "
                "export is configured by your own agentops.init(...)."
            )
        if export_queue_size < 1 or export_batch_size < 1:
            raise ValueError(
                f"export_queue_size and export_batch_size must be >= 1, got {export_queue_size!r} and "
                f"{export_batch_size!r}."
            )
        super().__init__(
            flush_timeout=flush_timeout,
            batch_size=batch_size,
            instrument_llm_clients=False,  # AgentOps instruments them; the core's would duplicate spans
            resource_attributes={
                LightningResourceAttributes.TRACER_NAME.value: "agentops",
                **(resource_attributes or {}),
            },
        )
        self.agentops_managed = agentops_managed
        self.instrument_managed = instrument_managed
        self.send_to_agentops = send_to_agentops
        self.api_key = api_key
        self.endpoint = endpoint
        self.exporter_endpoint = exporter_endpoint
        self.export_timeout = _positive("export_timeout", export_timeout)
        self.export_interval = _positive("export_interval", export_interval)
        self.export_queue_size = int(export_queue_size)
        self.export_batch_size = min(int(export_batch_size), self.export_queue_size)
        self.daemon = daemon
        self.agentops_mode: Mode | None = None
        self.exporter_probe: ExporterProbe | None = None
        self._exporter: AgentOpsSpanExporter | None = None
        self._export_processors: list[Any] = []
        self._token_ids = False

    # ------------------------------------------------------------------ lifecycle

    def init_worker(
        self, worker_id: int, store: LightningStore | None = None, *args: Any, **kwargs: Any
    ) -> None:
        """Set up AgentOps (once per process) and this provider; a second call only updates the store.

        Raises ``ValueError`` when sending is asked for without an API key, ``RuntimeError`` when AgentOps
        cannot be attached or its export cannot work (never a silent loss).
        """
        if self.tracer_provider is not None:
            super().init_worker(worker_id, store)
            return
        sending = self._sending_settings() if self.send_to_agentops else None
        if self.agentops_managed:
            mode = ensure_agentops(log_session_replay_url=sending is not None)
        else:
            mode = adopt_agentops()
        super().init_worker(worker_id, store)
        self.agentops_mode = mode
        if self.instrument_managed:
            self._token_ids = instrument_token_ids()
        if sending is not None:
            self._start_sending(*sending)

    def teardown_worker(self, worker_id: int, *args: Any, **kwargs: Any) -> None:
        """Deliver what is queued for AgentOps (bounded), remove the patches, shut this provider down.

        AgentOps itself stays initialized for the process (it cannot be set up twice); outside an agl trace
        its instrumentation records nothing.
        """
        for processor in self._export_processors:
            processor.shutdown()
        self._export_processors.clear()
        if self._token_ids:
            uninstrument_token_ids()
            self._token_ids = False
        super().teardown_worker(worker_id, *args, **kwargs)

    def _sending_settings(self) -> tuple[str, str, str]:
        api_key = self.api_key or os.environ.get(API_KEY_ENV)
        if not api_key:
            raise ValueError(
                f"send_to_agentops=True needs an AgentOps API key: pass api_key=... or set ${API_KEY_ENV}."
            )
        endpoint = self.endpoint or os.environ.get(API_ENDPOINT_ENV) or DEFAULT_API_ENDPOINT
        exporter_endpoint = (
            self.exporter_endpoint or os.environ.get(EXPORTER_ENDPOINT_ENV) or DEFAULT_EXPORTER_ENDPOINT
        )
        return api_key, endpoint, exporter_endpoint

    def _start_sending(self, api_key: str, endpoint: str, exporter_endpoint: str) -> None:
        from agentops.logging import setup_print_logger

        self.exporter_probe = probe = probe_agentops_exporter()
        if not probe.compatible:
            logger.info("%s; agl sends with its own exporter instead.", probe.message())
        auth = AgentOpsAuth(api_key=api_key, endpoint=endpoint, timeout=self.export_timeout)
        self._exporter = AgentOpsSpanExporter(
            endpoint=exporter_endpoint, auth=auth, timeout=self.export_timeout
        )
        spans = BatchSpanProcessor(
            self._exporter,
            max_queue_size=self.export_queue_size,
            max_export_batch_size=self.export_batch_size,
            schedule_delay_millis=self.export_interval * 1000,
            export_timeout_millis=self.export_timeout * 1000,
        )
        logs = LogUploadProcessor(endpoint=endpoint, auth=auth, timeout=self.export_timeout)
        provider = self.tracer_provider
        assert provider is not None
        provider.add_span_processor(spans)
        provider.add_span_processor(logs)
        self._export_processors = [spans, logs]
        setup_print_logger()  # AgentOps' capture of print() output, uploaded per trace

    def get_agentops_export_stats(self) -> AgentOpsExportStats | None:
        """What was delivered to AgentOps so far (None when this tracer does not send)."""
        return self._exporter.stats() if self._exporter is not None else None

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
        from agentops.enums import TraceState
        from agentops.sdk.core import tracer as agentops_core

        async with super()._trace_context(
            name, store=store, rollout_id=rollout_id, attempt_id=attempt_id
        ) as otel_tracer:
            tags = None
            if rollout_id is not None and attempt_id is not None:
                tags = {
                    LightningResourceAttributes.ROLLOUT_ID.value: rollout_id,
                    LightningResourceAttributes.ATTEMPT_ID.value: attempt_id,
                }
            # AgentOps' core directly: agentops.start_trace() would run a full default agentops.init()
            # (network included) if AgentOps had been shut down meanwhile.
            trace = None
            if agentops_core.initialized:
                trace = agentops_core.start_trace(trace_name=name or rollout_id or "agl", tags=tags)
            if trace is None:
                logger.warning(
                    "AgentOps did not start a trace; spans are still recorded without a session span."
                )
            try:
                yield otel_tracer
            except BaseException:
                if trace is not None:
                    agentops_core.end_trace(trace, end_state=str(TraceState.ERROR))
                raise
            if trace is not None:
                agentops_core.end_trace(trace, end_state=str(TraceState.SUCCESS))

    def get_langchain_handler(self) -> Any:
        """AgentOps' LangChain callback handler (spans go to the trace open where it runs), or None."""
        try:
            from agentops.integration.callbacks.langchain import LangchainCallbackHandler
        except ImportError as exc:
            logger.warning("AgentOps' LangChain handler is unavailable (%s); returning None.", exc)
            return None
        return LangchainCallbackHandler(api_key=None, tags=["agl"], auto_session=False)

    get_langchain_callback_handler = get_langchain_handler
