"""Test harness: a toy agent with a verifiable reward, and runners working the store on the test's loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from typing import Any

import aiohttp

from agl_core.litagent import rollout
from agl_core.runner import LitAgentRunner
from agl_core.store import LightningStore
from agl_core.tracer import OtelTracer
from agl_core.types import LLM

TASKS = [{"question": f"Answer with digits only, e.g. {n}."} for n in ("7", "42", "305", "9", "18", "64")]
SYSTEM = "You are a terse assistant."


def digit_share(text: str) -> float:
    """Verifiable reward: the share of the answer's non-space characters that are digits (0 when empty)."""
    chars = [c for c in text if not c.isspace()]
    return sum(c.isdigit() for c in chars) / len(chars) if chars else 0.0


@rollout
async def digits_agent(task: dict[str, str], llm: LLM) -> float:
    """One chat call through the proxy (system + user); reward = digit share of the reply."""
    body = {
        "model": llm.model,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task["question"]}],
        "max_tokens": 6,
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{llm.endpoint}/chat/completions", json=body, timeout=aiohttp.ClientTimeout(total=60)
        ) as response,
    ):
        response.raise_for_status()
        answer = await response.json()
    return digit_share(answer["choices"][0]["message"]["content"] or "")


@rollout
async def failing_agent(task: dict[str, str], llm: LLM) -> float:
    """Reward 0 on every task (nothing is good enough for a positive threshold)."""
    return 0.0


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
