"""The agl entry of the AutoGen agent: run the assistant unchanged on the task, reward its answer."""

from __future__ import annotations

from math_tasks import MathTask, reward

import agl_core as agl
from autogen_agent.agent import answer_question


@agl.rollout
async def autogen_rollout(task: MathTask, llm: agl.LLM) -> float:
    """One episode: ``OpenAIChatCompletionClient`` pointed at ``llm.endpoint``."""
    answer = await answer_question(
        task["question"], model=llm.model, base_url=llm.endpoint, api_key=llm.api_key or "unused"
    )
    return reward(answer, task["answer"])
