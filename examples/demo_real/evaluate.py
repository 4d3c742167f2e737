"""Held-out evaluation with confidence intervals: greedy episodes through an agl LLM proxy.

Every held-out problem is solved once, greedily (temperature 0), by the same agent code that trains,
against the model served by an ``LLMProxy`` (a Tinker sampler behind it: vLLM's engine, or agl-tinker's
batched local sampler; ``run.py --sampler``). Accuracy gets a
95% percentile-bootstrap interval over problems; the difference of two stages gets a paired bootstrap
interval (the same resampled problems on both sides).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent import Outcome, solve
from openai import AsyncOpenAI
from tasks import Task

from agl_core.llm_proxy import LLMProxy
from agl_tinker.backend import TinkerChatBackend
from agl_tinker.local import LocalServiceClient

__all__ = ["EvalResult", "bootstrap_ci", "evaluate_folder", "evaluate_sampler", "paired_difference_ci"]

RESAMPLES = 2000


def bootstrap_ci(values: list[float], seed: int = 0) -> tuple[float, float]:
    """The 95% percentile-bootstrap interval of the mean of ``values``."""
    rng = random.Random(seed)
    n = len(values)
    means = sorted(statistics.fmean(rng.choices(values, k=n)) for _ in range(RESAMPLES))
    return means[int(0.025 * RESAMPLES)], means[int(0.975 * RESAMPLES) - 1]


def paired_difference_ci(before: list[float], after: list[float], seed: int = 0) -> tuple[float, float]:
    """The 95% paired-bootstrap interval of ``mean(after) - mean(before)`` (same problems resampled)."""
    if len(before) != len(after):
        raise ValueError("paired_difference_ci needs per-problem scores of the same problems.")
    diffs = [a - b for a, b in zip(after, before, strict=True)]
    return bootstrap_ci(diffs, seed)


@dataclass
class EvalResult:
    """Held-out metrics of one model: accuracy with its interval, calculator use, tokens and speed."""

    stage: str
    scores: list[float]
    used_calculator: float
    tokens: float
    seconds: float
    outcomes: list[Outcome] = field(default_factory=list, repr=False)

    @property
    def accuracy(self) -> float:
        """The share of problems answered right."""
        return statistics.fmean(self.scores)

    def row(self) -> dict[str, Any]:
        """The result as a JSON-ready dict."""
        low, high = bootstrap_ci(self.scores)
        episodes = len(self.scores)
        return {
            "stage": self.stage,
            "accuracy": round(self.accuracy, 4),
            "ci95": [round(low, 4), round(high, 4)],
            "calculator_use": round(self.used_calculator, 4),
            "tokens_per_episode": round(self.tokens, 2),
            "episodes": episodes,
            "seconds": round(self.seconds, 1),
            "episodes_per_s": round(episodes / self.seconds, 3) if self.seconds else None,
            "tokens_per_s": round(self.tokens * episodes / self.seconds, 1) if self.seconds else None,
        }


async def evaluate_sampler(
    stage: str, sampler: Any, tokenizer: Any, tasks: list[Task], concurrency: int = 64
) -> EvalResult:
    """Solve every task once, greedily, with ``sampler`` served as an OpenAI model by an LLMProxy."""
    alias = f"demo-real-eval/{stage}"
    backend = TinkerChatBackend(sampler, tokenizer, model=alias, max_tokens=64)
    proxy = LLMProxy({alias: backend})
    await proxy.start()
    gate = asyncio.Semaphore(concurrency)

    async def one(task: Task, client: AsyncOpenAI) -> Outcome:
        async with gate:
            return await solve(task, client, alias, temperature=0.0)

    t0 = time.perf_counter()
    try:
        async with AsyncOpenAI(
            base_url=proxy.endpoint, api_key="unused", max_retries=1, timeout=600
        ) as client:
            outcomes = await asyncio.gather(*(one(task, client) for task in tasks))
    finally:
        await proxy.stop()
    return EvalResult(
        stage=stage,
        scores=[o.reward for o in outcomes],
        used_calculator=statistics.fmean(o.call is not None for o in outcomes),
        tokens=statistics.fmean(o.tokens for o in outcomes),
        seconds=time.perf_counter() - t0,
        outcomes=list(outcomes),
    )


async def evaluate_folder(
    stage: str, model_dir: Path, tasks: list[Task], service: LocalServiceClient
) -> EvalResult:
    """Evaluate the model saved in ``model_dir`` with ``service``'s sampler (see :func:`evaluate_sampler`).

    With vLLM the service's one engine serves the folder (its weights reloaded when another was served).
    """
    if service.sampler == "vllm":
        from transformers import AutoTokenizer

        from agl_tinker.vllm_sampler import VllmSamplingClient

        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        engine = await asyncio.to_thread(service.vllm_engine, str(model_dir))
        sampler = VllmSamplingClient(engine, tokenizer, stage, model_dir)
        return await evaluate_sampler(stage, sampler, tokenizer, tasks)
    training_client = await service.create_lora_training_client(str(model_dir), rank=0)
    sampler = await training_client.save_weights_and_get_sampling_client()
    return await evaluate_sampler(stage, sampler, training_client.get_tokenizer(), tasks)
