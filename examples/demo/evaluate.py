"""Held-out evaluation: serve a model through an agl LLM proxy and run the agent's episodes against it."""

from __future__ import annotations

import asyncio
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent import MAX_TOKENS, solve
from openai import AsyncOpenAI
from tasks import Task

from agl_core.llm_proxy import LLMProxy
from agl_tinker.backend import TinkerChatBackend
from agl_tinker.local import LocalServiceClient

__all__ = ["EvalResult", "evaluate_folder", "evaluate_sampler"]


@dataclass
class EvalResult:
    """Held-out metrics of one model: mean reward, share of all-digit answers, completion tokens/episode."""

    stage: str
    reward: float
    success_rate: float
    tokens: float
    episodes: int

    def row(self) -> dict[str, Any]:
        """The result as a JSON-ready dict."""
        return {
            "stage": self.stage,
            "reward": round(self.reward, 4),
            "success_rate": round(self.success_rate, 4),
            "tokens": round(self.tokens, 2),
            "episodes": self.episodes,
        }


async def evaluate_sampler(
    stage: str, sampler: Any, tokenizer: Any, tasks: list[Task], samples: int
) -> EvalResult:
    """Run ``samples`` episodes of every task with ``sampler`` served as an OpenAI model by an LLMProxy."""
    alias = f"demo-eval/{stage}"
    backend = TinkerChatBackend(sampler, tokenizer, model=alias, max_tokens=MAX_TOKENS)
    proxy = LLMProxy({alias: backend})
    await proxy.start()
    try:
        async with AsyncOpenAI(
            base_url=proxy.endpoint, api_key="unused", max_retries=1, timeout=120
        ) as client:
            outcomes = await asyncio.gather(
                *(solve(task, client, alias) for task in tasks for _ in range(samples))
            )
    finally:
        await proxy.stop()
    return EvalResult(
        stage=stage,
        reward=statistics.fmean(o.reward for o in outcomes),
        success_rate=statistics.fmean(o.reward >= 1.0 for o in outcomes),
        tokens=statistics.fmean(o.tokens for o in outcomes),
        episodes=len(outcomes),
    )


async def evaluate_folder(
    stage: str, model_dir: Path, tasks: list[Task], samples: int, scratch: Path, seed: int = 1234
) -> EvalResult:
    """Load the model saved in ``model_dir`` on CPU and evaluate it (see :func:`evaluate_sampler`)."""
    service = LocalServiceClient(checkpoint_dir=scratch, seed=seed)
    training_client = await service.create_lora_training_client(str(model_dir), rank=0)
    sampler = await training_client.save_weights_and_get_sampling_client()
    return await evaluate_sampler(stage, sampler, training_client.get_tokenizer(), tasks, samples)
