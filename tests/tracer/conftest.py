"""Fixtures for tracer tests: a real in-memory store, an initialized OtelTracer and a fake LLM server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer.otel import OtelTracer
from agl_testing.fake_openai import FakeOpenAIServer


@pytest.fixture
async def store() -> AsyncIterator[InMemoryLightningStore]:
    """A fresh in-memory store."""
    store = InMemoryLightningStore()
    yield store
    await store.close()


@pytest.fixture
def tracer(store: InMemoryLightningStore) -> Iterator[OtelTracer]:
    """An OtelTracer initialized for worker 0 on ``store`` (LLM clients instrumented)."""
    tracer = OtelTracer(flush_timeout=10.0)
    tracer.init_worker(0, store)
    yield tracer
    tracer.teardown_worker(0)


@pytest.fixture
def llm_server() -> Iterator[FakeOpenAIServer]:
    """A local OpenAI-compatible server that always returns vLLM-style token ids and echoes the prompt."""
    with FakeOpenAIServer(token_ids="always") as server:
        yield server
