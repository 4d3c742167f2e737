"""Fixtures: a real in-memory store, a fake OpenAI-compatible server and an initialized AgentOps tracer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest

from agl_agentops.tracer import AgentOpsTracer
from agl_core.store.memory import InMemoryLightningStore

if TYPE_CHECKING:
    from agl_testing.fake_openai import FakeOpenAIServer


@pytest.fixture
async def store() -> AsyncIterator[InMemoryLightningStore]:
    """A fresh in-memory store."""
    store = InMemoryLightningStore()
    yield store
    await store.close()


@pytest.fixture
def llm_server() -> Iterator[FakeOpenAIServer]:
    """A local OpenAI-compatible server that returns vLLM-style token ids and echoes the prompt."""
    from agl_testing.fake_openai import FakeOpenAIServer

    with FakeOpenAIServer(token_ids="always") as server:
        yield server


@pytest.fixture
def tracer(store: InMemoryLightningStore) -> Iterator[AgentOpsTracer]:
    """An AgentOps tracer (nothing sent to AgentOps) initialized for worker 0 on ``store``."""
    tracer = AgentOpsTracer(flush_timeout=10.0)
    tracer.init_worker(0, store)
    yield tracer
    tracer.teardown_worker(0)


async def new_attempt(store: InMemoryLightningStore) -> tuple[str, str]:
    """Create a rollout with its first attempt; return (rollout_id, attempt_id)."""
    attempted = await store.start_rollout(input={"task": "test"})
    return attempted.rollout_id, attempted.attempt.attempt_id
