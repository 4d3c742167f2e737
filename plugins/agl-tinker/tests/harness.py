"""Test harness: a tiny model built once per session, a digits agent, and runners on the test's loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from agl_core.litagent import rollout
from agl_core.runner import LitAgentRunner
from agl_core.store import LightningStore
from agl_core.tracer import OtelTracer
from agl_core.types import LLM
from agl_tinker import Tinker

TASKS = [{"question": f"Reply with digits only, like {d}{d}{d}."} for d in "0123456789"]


def digit_fraction(text: str) -> float:
    """The verifiable reward: the share of the answer's non-space characters that are digits."""
    chars = [c for c in text if not c.isspace()]
    return sum(c.isdigit() for c in chars) / len(chars) if chars else 0.0


async def _chat(llm: LLM, messages: list[dict[str, str]]) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{llm.endpoint}/chat/completions",
            json={"model": llm.model, "messages": messages, "max_tokens": 6},
            timeout=aiohttp.ClientTimeout(total=60),
        ) as response,
    ):
        response.raise_for_status()
        return await response.json()


@rollout
async def digits_agent(task: dict[str, str], llm: LLM) -> float:
    """One LLM call; reward = share of digit characters in the answer."""
    answer = await _chat(llm, [{"role": "user", "content": task["question"]}])
    return digit_fraction(answer["choices"][0]["message"]["content"] or "")


@rollout
async def two_turn_agent(task: dict[str, str], llm: LLM) -> float:
    """Two LLM calls (the second sees the first answer); reward on the second answer."""
    messages = [{"role": "user", "content": task["question"]}]
    first = await _chat(llm, messages)
    messages += [first["choices"][0]["message"], {"role": "user", "content": "Again."}]
    second = await _chat(llm, messages)
    return digit_fraction(second["choices"][0]["message"]["content"] or "")


@asynccontextmanager
async def running_runners(
    store: LightningStore, agent: Any = digits_agent, n: int = 2
) -> AsyncIterator[None]:
    """``n`` runners working the store's queue on this event loop until the block exits."""
    stop = threading.Event()
    with ExitStack() as stack:
        runners = [
            stack.enter_context(
                LitAgentRunner[Any](OtelTracer(), heartbeat_interval=0, poll_interval=0.02).run_context(
                    agent=agent, store=store, worker_id=i
                )
            )
            for i in range(n)
        ]
        tasks = [asyncio.create_task(r.iter(event=stop)) for r in runners]
        try:
            yield
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)


def local_tinker(model_dir: Path, run_dir: Path, **overrides: Any) -> Tinker:
    """A local-backend Tinker with small, fast settings (overridable)."""
    settings: dict[str, Any] = {
        "model_name": str(model_dir),
        "backend": "local",
        "lora_rank": 0,
        "learning_rate": 3e-4,
        "group_size": 8,
        "batch_size": 4,
        "n_steps": 3,
        "max_tokens": 6,
        "run_dir": run_dir,
        "progress": False,
        "rollout_timeout": 120.0,
    }
    settings.update(overrides)
    return Tinker(**settings)


async def run_tinker(
    algo: Tinker, store: LightningStore, train: Sequence[Any], agent: Any = digits_agent, timeout: float = 240
) -> None:
    """Wire ``algo`` to ``store`` and run it with runners on this loop."""
    algo.set_store(store)
    async with running_runners(store, agent):
        await asyncio.wait_for(algo.run(train), timeout=timeout)
