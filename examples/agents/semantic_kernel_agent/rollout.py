"""The agl entry of the Semantic Kernel agent; ``diagnostics`` turns Semantic Kernel's own telemetry on."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from math_tasks import MathTask, reward

import agl_core as agl
from semantic_kernel_agent.agent import answer_question


@agl.rollout
async def semantic_kernel_rollout(task: MathTask, llm: agl.LLM) -> float:
    """One episode against ``llm.endpoint`` (the model server or the proxy's route)."""
    answer = await answer_question(
        task["question"], model=llm.model, base_url=llm.endpoint, api_key=llm.api_key or "x"
    )
    return reward(answer, task["answer"])


@contextmanager
def diagnostics(*, sensitive: bool) -> Iterator[None]:
    """Semantic Kernel's documented telemetry: spans (``..._ENABLE_OTEL_DIAGNOSTICS``), with ``sensitive``
    the messages too (``..._SENSITIVE``), written as Python log records that its docs route to OpenTelemetry
    with ``LoggingHandler`` on the ``semantic_kernel`` logger at INFO."""
    from opentelemetry import _logs
    from opentelemetry.sdk._logs import LoggingHandler
    from semantic_kernel.utils.telemetry.model_diagnostics import decorators

    settings = decorators.MODEL_DIAGNOSTICS_SETTINGS  # read from the environment at import
    before = (settings.enable_otel_diagnostics, settings.enable_otel_diagnostics_sensitive)
    settings.enable_otel_diagnostics, settings.enable_otel_diagnostics_sensitive = True, sensitive
    handler = LoggingHandler(logger_provider=_logs.get_logger_provider())
    handler.addFilter(logging.Filter("semantic_kernel"))
    sk_logger = logging.getLogger("semantic_kernel")
    level = sk_logger.level
    sk_logger.addHandler(handler)
    sk_logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        sk_logger.removeHandler(handler)
        sk_logger.setLevel(level)
        settings.enable_otel_diagnostics, settings.enable_otel_diagnostics_sensitive = before
