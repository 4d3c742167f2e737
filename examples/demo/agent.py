"""The demo agent: an ordinary ``openai`` client, two turns with a Python "checker" tool in between.

Turn 1: the model answers the task. The agent runs the checker on that answer and sends its verdict back.
Turn 2: the model gives its final answer; the reward is the checker's score of the final answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openai import AsyncOpenAI
from tasks import Task, digit_share

from agl_core.litagent import rollout
from agl_core.types import LLM, NamedResources, PromptTemplate

__all__ = ["Outcome", "check_answer", "demo_agent", "solve"]

SYSTEM = "You are a terse assistant."
MAX_TOKENS = 6


@dataclass
class Outcome:
    """One episode: the final answer, its reward and the completion tokens the model spent."""

    answer: str
    reward: float
    tokens: int


def check_answer(answer: str) -> str:
    """The checker tool: a short verdict on how many characters of ``answer`` are digits."""
    chars = [c for c in answer if not c.isspace()]
    digits = sum(c.isdigit() for c in chars)
    return f"Checker: {digits} of {len(chars)} characters are digits. Give your final answer."


async def solve(task: Task, client: AsyncOpenAI, model: str, system: str = SYSTEM) -> Outcome:
    """Run the two-turn episode on ``task`` with ``model`` behind ``client``."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": task["question"]},
    ]
    tokens = 0
    answer = ""
    for turn in range(2):
        reply = await client.chat.completions.create(model=model, messages=messages, max_tokens=MAX_TOKENS)
        answer = reply.choices[0].message.content or ""
        tokens += reply.usage.completion_tokens if reply.usage else 0
        if turn == 0:
            messages += [
                {"role": "assistant", "content": answer},
                {"role": "user", "content": check_answer(answer)},
            ]
    return Outcome(answer, digit_share(answer), tokens)


@rollout
async def demo_agent(task: Task, llm: LLM, resources: NamedResources) -> float:
    """The rollout: reach the served model (``main_llm``) through the LLM proxy; return the reward.

    The system prompt comes from a ``prompt_template`` resource when one is published (so APO can
    optimise it), else the built-in ``SYSTEM``.
    """
    template = resources.get("prompt_template")
    system = template.template if isinstance(template, PromptTemplate) else SYSTEM
    client = AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "unused", max_retries=1, timeout=120)
    async with client:
        return (await solve(task, client, llm.model, system)).reward
