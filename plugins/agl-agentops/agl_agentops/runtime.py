"""The process-wide AgentOps SDK, set up once so that it serves every agl tracer in the process.

AgentOps is a process singleton: one client, one ``TracingCore``, one set of library patches, and it makes
its tracer provider the global OpenTelemetry one (which can be set only once per process).

**Managed** (:func:`ensure_agentops`): agl runs ``agentops.init`` with AgentOps' telemetry setup replaced
for that call. AgentOps then holds :data:`agentops_provider`, a provider that creates each span on the
provider of the agl tracer active where the span starts (context-local; a non-recording span outside
every ``trace_context``). So every agl tracer gets its own spans, several can run side by side, and the
setup never has to be redone. AgentOps' network paths are never created: no API key is given to it (no
auth call), no exporter, no metrics reader, no log-upload processor -- an agl tracer that is asked to
send to AgentOps adds its own, background ones to its own provider. Its flush (called by AgentOps at
every trace end) returns at once. AgentOps' takeover of the ``opentelemetry`` logger (which silenced
OpenTelemetry's export errors) is undone, and it writes no ``agentops.log`` unless asked to.

**External** (:func:`adopt_agentops`): the application ran ``agentops.init`` itself. agl attaches its span
processor to AgentOps' provider, repairs AgentOps' exporter if the installed OpenTelemetry broke it, and
stops AgentOps' end-of-trace flush from blocking the agent (its batch processor still exports on its
own schedule).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import TracerProvider

from agl_agentops._core import ActiveTracerProvider, LightningSpanProcessor
from agl_agentops.compat import repair_agentops_exporter

__all__ = ["AgentOpsProvider", "adopt_agentops", "agentops_provider", "ensure_agentops"]

logger = logging.getLogger("agl_core.tracer.agentops.runtime")

Mode = Literal["managed", "external"]

_LOG_FILE_ENV = "AGENTOPS_LOGGING_TO_FILE"
_lock = threading.RLock()


class AgentOpsProvider(ActiveTracerProvider):
    """The provider AgentOps holds when agl manages it: follows the active agl tracer; flush is a no-op.

    Spans are buffered per trace context by the agl tracer (flushed when the context exits) and exported
    to AgentOps by a background processor, so AgentOps' synchronous flushes have nothing to wait for.
    """

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Return at once (see the class docstring)."""
        return True

    def shutdown(self) -> None:
        """Nothing to release: each agl tracer shuts its own provider down."""


agentops_provider = AgentOpsProvider()
"""The process-wide instance given to AgentOps (and, when nobody set one before, the global provider)."""


class _NonBlockingFlush:
    """An application's AgentOps provider, except that ``force_flush`` does not wait for the network."""

    def __init__(self, provider: TracerProvider) -> None:
        self.wrapped = provider

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace_api.Tracer:
        return self.wrapped.get_tracer(*args, **kwargs)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


def _setup_telemetry(**_config: Any) -> tuple[Any, Any]:
    """Replacement of ``agentops.sdk.core.setup_telemetry`` for agl's ``agentops.init`` call."""
    from opentelemetry.sdk.metrics import MeterProvider

    current = trace_api.get_tracer_provider()
    if isinstance(current, trace_api.ProxyTracerProvider):
        trace_api.set_tracer_provider(agentops_provider)
    elif current is not agentops_provider:
        logger.warning(
            "The global OpenTelemetry tracer provider was set before AgentOps (%s). Spans AgentOps creates "
            "through it (agentops.start_trace, @agent/@tool decorators) go there, not to the agl store; "
            "LLM-call spans of AgentOps' instrumentation are still captured.",
            type(current).__name__,
        )
    return agentops_provider, MeterProvider(metric_readers=[], shutdown_on_exit=False)


@contextmanager
def _quiet_agentops_init() -> Iterator[None]:
    """Keep ``agentops.init``'s process-wide side effects that agl does not want from outliving it."""
    otel_logger = logging.getLogger("opentelemetry")
    saved = (otel_logger.propagate, otel_logger.level, list(otel_logger.handlers))
    log_file_env = os.environ.get(_LOG_FILE_ENV)
    if log_file_env is None:
        os.environ[_LOG_FILE_ENV] = "false"
    try:
        yield
    finally:
        otel_logger.propagate, level, handlers = saved
        otel_logger.setLevel(level)
        for handler in list(otel_logger.handlers):
            otel_logger.removeHandler(handler)
        for handler in handlers:
            otel_logger.addHandler(handler)
        if log_file_env is None:
            os.environ.pop(_LOG_FILE_ENV, None)


def ensure_agentops(*, log_session_replay_url: bool = False) -> Mode:
    """Initialize AgentOps with :data:`agentops_provider` unless it is already up (then adopt it).

    Returns ``"managed"`` when AgentOps runs on agl's provider, ``"external"`` when the application had
    initialized it first.
    """
    import agentops
    from agentops.sdk import core

    with _lock:
        if core.tracer.initialized:
            return adopt_agentops()
        original = core.setup_telemetry
        core.setup_telemetry = _setup_telemetry
        try:
            with _quiet_agentops_init():
                agentops.init(
                    api_key="",  # never AgentOps' own auth; an agl tracer that sends authenticates itself
                    auto_start_session=False,
                    instrument_llm_calls=True,
                    log_session_replay_url=log_session_replay_url,
                )
        finally:
            core.setup_telemetry = original
        if core.tracer.provider is not agentops_provider:
            raise RuntimeError(
                "agentops.init() did not set up tracing with agl's provider (agentops "
                f"{_agentops_version()}); AgentOps spans would not reach the agl store."
            )
        return "managed"


def adopt_agentops() -> Mode:
    """Attach agl to the AgentOps the application initialized (see the module docstring).

    Raises ``RuntimeError`` when AgentOps is not initialized, uses a provider agl cannot attach to, or its
    exporter is broken beyond repair.
    """
    from agentops.sdk import core

    with _lock:
        if not core.tracer.initialized:
            raise RuntimeError(
                "AgentOpsTracer(agentops_managed=False) needs AgentOps initialized first: call "
                "agentops.init(...) before init_worker(), or use agentops_managed=True."
            )
        provider = core.tracer.provider
        if provider is agentops_provider:
            return "managed"
        if isinstance(provider, _NonBlockingFlush):
            return "external"
        if not isinstance(provider, TracerProvider):
            raise RuntimeError(
                f"AgentOps' tracer provider is a {type(provider).__name__}, not an OpenTelemetry SDK "
                "TracerProvider; agl cannot route its spans to the store."
            )
        repair_agentops_exporter()
        provider.add_span_processor(LightningSpanProcessor())
        core.tracer.provider = _NonBlockingFlush(provider)
        logger.info("agl attached to the AgentOps SDK initialized by the application.")
        return "external"


def _agentops_version() -> str:
    from importlib.metadata import version

    return version("agentops")
