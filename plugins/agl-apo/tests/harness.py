"""Test harness: the word agent, runners on the test's event loop, and a fake OpenAI server."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import ExitStack, asynccontextmanager
from typing import Any

import openai

from agl_apo import APO
from agl_core.litagent import rollout
from agl_core.runner import LitAgentRunner
from agl_core.store import LightningStore
from agl_core.tracer import OtelTracer
from agl_core.types import LLM, PromptTemplate
from agl_testing.fake_openai import FakeOpenAIServer

from .scripted import CRITIC_MODEL, EDITOR_MODEL, SEED_TEMPLATE, TASK_MODEL, ScriptedModels

_clients: dict[str, openai.AsyncOpenAI] = {}


def _client(endpoint: str) -> openai.AsyncOpenAI:
    """One client per endpoint while runners run (creating one per rollout is slow)."""
    if endpoint not in _clients:
        _clients[endpoint] = openai.AsyncOpenAI(base_url=endpoint, api_key="test-key", max_retries=0)
    return _clients[endpoint]


async def close_clients() -> None:
    """Close the agent's clients (they belong to the event loop that is about to end)."""
    clients = list(_clients.values())
    _clients.clear()
    for client in clients:
        await client.close()


@rollout
async def word_agent(task: dict[str, str], prompt_template: PromptTemplate, llm: LLM) -> float:
    """Ask the task model to repeat the word; reward 1 for the exact upper-case word."""
    response = await _client(llm.endpoint).chat.completions.create(
        model=llm.model,
        messages=[{"role": "user", "content": prompt_template.format(word=task["word"])}],
        timeout=30,
    )
    answer = (response.choices[0].message.content or "").strip()
    return 1.0 if answer == task["expected"] else 0.0


def initial_resources(server: FakeOpenAIServer, template: str = SEED_TEMPLATE) -> dict[str, Any]:
    """The seed prompt plus the task model endpoint."""
    return {
        "prompt_template": PromptTemplate(template=template, engine="f-string"),
        "llm": LLM(endpoint=server.base_url, model=TASK_MODEL),
    }


def make_apo(server: FakeOpenAIServer, **overrides: Any) -> APO[Any]:
    """An APO on the fake server with small, fast settings (overridable)."""
    settings: dict[str, Any] = {
        "base_url": server.base_url,
        "api_key": "test-key",
        "gradient_model": CRITIC_MODEL,
        "apply_edit_model": EDITOR_MODEL,
        "gradient_batch_size": 3,
        "val_batch_size": 6,
        "beam_width": 2,
        "branch_factor": 2,
        "beam_rounds": 2,
        "rollout_batch_timeout": 60.0,
        "progress": False,
        "seed": 7,
        "poll_interval": 0.2,
    }
    settings.update(overrides)
    return APO(**settings)


@asynccontextmanager
async def fake_models() -> AsyncIterator[tuple[FakeOpenAIServer, ScriptedModels]]:
    """A running fake server answering as critic, editor and task model."""
    models = ScriptedModels()
    async with FakeOpenAIServer(models, models=[TASK_MODEL, CRITIC_MODEL, EDITOR_MODEL]) as server:
        yield server, models


@asynccontextmanager
async def running_runners(store: LightningStore, n: int = 2) -> AsyncIterator[None]:
    """``n`` runners working the store's queue on this event loop until the block exits."""
    stop = threading.Event()
    with ExitStack() as stack:
        runners = [
            stack.enter_context(
                LitAgentRunner[Any](OtelTracer(), heartbeat_interval=0, poll_interval=0.05).run_context(
                    agent=word_agent, store=store, worker_id=i
                )
            )
            for i in range(n)
        ]
        tasks = [asyncio.create_task(r.iter(event=stop)) for r in runners]
        try:
            yield
        finally:
            stop.set()
            try:
                await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)
            finally:
                await close_clients()


async def run_apo(
    apo: APO[Any],
    store: LightningStore,
    resources: dict[str, Any],
    train: Sequence[Any],
    val: Sequence[Any],
    *,
    runners: int = 2,
) -> None:
    """Wire ``apo`` to ``store`` and run it with runners on this loop."""
    apo.set_store(store)
    apo.set_initial_resources(resources)
    async with running_runners(store, runners):
        await asyncio.wait_for(apo.run(train, val), timeout=120)
