"""The agl entries of the OpenAI Agents SDK agent: run it unchanged on the task, reward its answer.

``agents_sdk_rollout`` uses the SDK's default Responses model; ``agents_sdk_chat_rollout`` its chat
completions model (how the SDK reaches servers that serve only chat completions);
``agents_sdk_streamed_rollout`` the Responses model through ``Runner.run_streamed``.
"""

from __future__ import annotations

from math_tasks import MathTask, reward

import agl_core as agl
from openai_agents_sdk.agent import answer_question


@agl.rollout
async def agents_sdk_rollout(task: MathTask, llm: agl.LLM) -> float:
    """One episode through the Responses API at ``llm.endpoint``."""
    answer = await answer_question(
        task["question"], model=llm.model, base_url=llm.endpoint, api_key=llm.api_key or "unused"
    )
    return reward(answer, task["answer"])


@agl.rollout
async def agents_sdk_chat_rollout(task: MathTask, llm: agl.LLM) -> float:
    """One episode through chat completions at ``llm.endpoint``."""
    answer = await answer_question(
        task["question"],
        model=llm.model,
        base_url=llm.endpoint,
        api_key=llm.api_key or "unused",
        api="chat_completions",
    )
    return reward(answer, task["answer"])


@agl.rollout
async def agents_sdk_streamed_rollout(task: MathTask, llm: agl.LLM) -> float:
    """One episode through the Responses API at ``llm.endpoint``, streamed."""
    answer = await answer_question(
        task["question"], model=llm.model, base_url=llm.endpoint, api_key=llm.api_key or "unused", stream=True
    )
    return reward(answer, task["answer"])
