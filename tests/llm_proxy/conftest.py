"""Fixtures for the LLM proxy tests: an in-memory store with a rollout, two fake model servers, a proxy."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest

from agl_core.llm_proxy import LLMProxy
from agl_core.store.memory import InMemoryLightningStore
from agl_testing.fake_openai import FakeOpenAIServer


@dataclass
class Rollout:
    """A started rollout's ids."""

    rollout_id: str
    attempt_id: str


@pytest.fixture
async def store() -> AsyncIterator[InMemoryLightningStore]:
    store = InMemoryLightningStore()
    yield store
    await store.close()


@pytest.fixture
async def rollout(store: InMemoryLightningStore) -> Rollout:
    started = await store.start_rollout(input={"task": "test"})
    return Rollout(started.rollout_id, started.attempt.attempt_id)


@pytest.fixture
async def backend_a() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
async def backend_b() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
async def proxy(
    store: InMemoryLightningStore, backend_a: FakeOpenAIServer, backend_b: FakeOpenAIServer
) -> AsyncIterator[LLMProxy]:
    """A proxy serving model ``m`` from both fake backends, recording into ``store``."""
    async with LLMProxy({"m": [backend_a.base_url, backend_b.base_url]}, store=store) as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def chat(content: str, **extra: object) -> dict[str, object]:
    """A minimal chat request body for model ``m``."""
    return {"model": "m", "messages": [{"role": "user", "content": content}], **extra}


def sse_chunks(text: str) -> list[dict[str, object]]:
    """The JSON chunks of an SSE body (``[DONE]`` excluded)."""
    import json

    out = []
    for block in text.split("\n\n"):
        block = block.strip()
        if block.startswith("data:") and block != "data: [DONE]":
            out.append(json.loads(block[len("data:") :]))
    return out
