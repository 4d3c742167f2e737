"""Emitter tests use a real OtelTracer with local trace contexts (no store needed)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agl_core.tracer.otel import OtelTracer


@pytest.fixture
def tracer() -> Iterator[OtelTracer]:
    """An initialized OtelTracer without a store; spans stay local (``get_last_trace``)."""
    tracer = OtelTracer(instrument_llm_clients=False)
    tracer.init_worker(0)
    yield tracer
    tracer.teardown_worker(0)
