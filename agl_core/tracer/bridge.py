"""The global-provider bridge: spans of *any* OpenTelemetry instrumentation, inside a rollout, reach agl.

OpenInference, OpenLLMetry and the official contrib instrumentations (LangChain/LangGraph, the OpenAI Agents
SDK, CrewAI, LiteLLM, Anthropic, DSPy, ...) all create spans through the **global** tracer provider
(``opentelemetry.trace.get_tracer(...)``). :func:`bridge_global_provider` makes those spans reach agl, once
per process:

* the application has set no SDK provider (the global one is OpenTelemetry's default proxy): agl installs
  one SDK ``TracerProvider`` as the global provider (sampler ALWAYS_ON, no exporter) with agl's span
  processor on it;
* the application has set its own SDK ``TracerProvider``: agl **adds** its span processor to it and never
  replaces it. The application's processors and exporters keep receiving every span, as before;
* the global provider is something else (no ``add_span_processor``): nothing can be attached; agl logs it
  once and says how to attach by hand.

agl's processor (:class:`~agl_core.tracer.LightningSpanProcessor`) takes only spans started inside a
rollout's ``trace_context`` (or under a span that was), attributed context-locally exactly like agl's own
spans; every other span is ignored. Opt out with ``AGL_OTEL_GLOBAL_PROVIDER=0`` or
``OtelTracer(global_provider=False)``; then attach by hand with
``provider.add_span_processor(agl_core.tracer.bridge.span_processor())``.

If the application sets its provider *after* agl installed one, OpenTelemetry refuses the second
``set_tracer_provider`` (it logs "Overriding of current TracerProvider is not allowed"): set yours before
starting agl, or opt out.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Literal

from opentelemetry import trace as trace_api
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON

from agl_core.tracer._processor import LightningSpanProcessor
from agl_core.tracer.routing import ActiveTracerProvider

__all__ = [
    "GLOBAL_PROVIDER_ENV",
    "SDK_DISABLED_ENV",
    "BridgeMode",
    "attach_span_processor",
    "bridge_global_provider",
    "bridge_mode",
    "global_provider_enabled",
    "keep_enabled",
    "span_processor",
]

logger = logging.getLogger(__name__)

GLOBAL_PROVIDER_ENV = "AGL_OTEL_GLOBAL_PROVIDER"
"""Set to ``0`` / ``false`` / ``no`` / ``off`` to keep agl away from the global tracer provider."""

BridgeMode = Literal["installed", "attached", "routed", "unsupported", "disabled"]
"""What :func:`bridge_global_provider` did: installed agl's provider as the global one, attached agl's
processor to the application's provider, found agl's own routing provider there already (a tracer plugin
installed :class:`~agl_core.tracer.ActiveTracerProvider`: spans already reach the active agl tracer), found
a provider it cannot attach to, or was switched off."""

SDK_DISABLED_ENV = "OTEL_SDK_DISABLED"
"""OpenTelemetry's switch that turns every SDK provider into a no-op (CrewAI documents it as its telemetry
opt-out). agl's own providers ignore it (:func:`keep_enabled`): they send spans only to the agl store."""

_DEFAULT_MAX_SPAN_ATTRIBUTES = 10_000
_OFF_VALUES = ("0", "false", "no", "off")

_lock = threading.Lock()
_processor: LightningSpanProcessor | None = None
_attached: dict[int, trace_api.TracerProvider] = {}
_installed: TracerProvider | None = None
_mode: BridgeMode | None = None


def global_provider_enabled(flag: bool | None = None) -> bool:
    """Whether agl may touch the global provider: ``flag`` when given, else ``$AGL_OTEL_GLOBAL_PROVIDER``."""
    if flag is not None:
        return flag
    return os.environ.get(GLOBAL_PROVIDER_ENV, "1").strip().lower() not in _OFF_VALUES


def span_processor() -> LightningSpanProcessor:
    """The process-wide agl span processor to attach to foreign providers (created on first use)."""
    global _processor
    with _lock:
        if _processor is None:
            _processor = LightningSpanProcessor()
        return _processor


_warned_disabled = False


def keep_enabled(provider: object) -> None:
    """Keep one of agl's own SDK providers (tracer or logger) recording under ``OTEL_SDK_DISABLED=true``.

    The SDK reads the variable when a provider is built and then hands out no-op tracers; rollouts would
    record zero LLM calls without a word. agl's providers export nowhere but the agl store, so they stay on,
    and agl says so once (providers the application builds stay disabled, as the variable asks).
    """
    global _warned_disabled
    if os.environ.get(SDK_DISABLED_ENV, "").strip().lower() != "true":
        return
    if getattr(provider, "_disabled", False):  # the SDK keeps the variable's value here (1.43 - 1.45)
        provider._disabled = False  # type: ignore[attr-defined]
    if not _warned_disabled:
        _warned_disabled = True
        logger.warning(
            "%s=true is set (e.g. CrewAI's telemetry opt-out): agl keeps capturing rollouts with its own "
            "OpenTelemetry providers, which send spans only to the agl store. Providers the application "
            "builds itself stay disabled, so spans made through them are not captured.",
            SDK_DISABLED_ENV,
        )


def span_limits() -> SpanLimits:
    """agl's span limits: many attributes (LLM spans carry flattened messages) unless the user set one."""
    return SpanLimits(
        max_span_attributes=None
        if "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT" in os.environ
        else _DEFAULT_MAX_SPAN_ATTRIBUTES
    )


def attach_span_processor(provider: trace_api.TracerProvider) -> bool:
    """Add agl's span processor to ``provider`` once; False when the provider cannot take processors."""
    add = getattr(provider, "add_span_processor", None)
    if not callable(add):
        return False
    processor = span_processor()
    with _lock:
        if id(provider) in _attached:
            return True
        _attached[id(provider)] = provider
    add(processor)
    return True


def bridge_mode() -> BridgeMode | None:
    """What the bridge did in this process so far (None before the first :func:`bridge_global_provider`)."""
    return _mode


def bridge_global_provider(enabled: bool | None = None) -> BridgeMode:
    """Make spans made through the global provider inside rollouts reach agl (idempotent; see module doc).

    ``enabled`` overrides ``$AGL_OTEL_GLOBAL_PROVIDER``. Returns what was done.
    """
    global _mode, _installed
    if not global_provider_enabled(enabled):
        return "disabled"
    current = trace_api.get_tracer_provider()
    if isinstance(current, trace_api.ProxyTracerProvider):
        provider = TracerProvider(
            resource=Resource.create({"service.name": "agl"}), sampler=ALWAYS_ON, span_limits=span_limits()
        )
        keep_enabled(provider)
        trace_api.set_tracer_provider(provider)
        current = trace_api.get_tracer_provider()  # another thread may have won the race: use its provider
        if current is provider:
            _installed = provider
    mode: BridgeMode = "installed" if current is _installed else "attached"
    if isinstance(current, ActiveTracerProvider):
        mode = "routed"
    elif not attach_span_processor(current):
        if _mode != "unsupported":
            logger.warning(
                "The global OpenTelemetry tracer provider (%s) takes no span processors, so spans other "
                "instrumentations make through it are not captured by agl. Use an SDK TracerProvider, or add "
                "agl_core.tracer.bridge.span_processor() to the provider behind it.",
                type(current).__name__,
            )
        mode = "unsupported"
    elif _mode is None:
        logger.debug("agl tracer bridge: %s (global provider %s)", mode, type(current).__name__)
    _mode = mode
    return mode
