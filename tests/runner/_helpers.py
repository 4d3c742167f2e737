"""Helpers of the runner tests: a runner on a real store with a real tracer, bounded waits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from agl_core.runner import LitAgentRunner
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer.otel import OtelTracer
from agl_core.types import Hook, Span


def otel_tracer() -> OtelTracer:
    """The real OpenTelemetry tracer (LLM client instrumentation is not the point here)."""
    return OtelTracer(instrument_llm_clients=False)


@contextmanager
def running(
    agent: Any,
    store: InMemoryLightningStore,
    *,
    tracer: Any | None = None,
    worker_id: int = 0,
    hooks: Sequence[Hook] | None = None,
    **options: Any,
) -> Iterator[LitAgentRunner[Any]]:
    """A LitAgentRunner set up for one worker on ``store`` (heartbeats off unless asked for)."""
    options.setdefault("heartbeat_interval", 0)
    runner: LitAgentRunner[Any] = LitAgentRunner(tracer if tracer is not None else otel_tracer(), **options)
    with runner.run_context(agent=agent, store=store, hooks=hooks, worker_id=worker_id):
        yield runner


async def wait_until(condition: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    """Re-check ``condition`` until it holds; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(0.005)


def reward_values(spans: Sequence[Span]) -> list[float]:
    """The reward of every reward span, in order."""
    from agl_core.emitter import get_reward_value

    return [value for span in spans if (value := get_reward_value(span)) is not None]
