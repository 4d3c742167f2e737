"""The agl entry of the LangGraph agent: run the graph unchanged on the task, reward its answer."""

from __future__ import annotations

from math_tasks import MathTask, reward

import agl_core as agl
from langgraph_agent.agent import answer_question


@agl.rollout
def langgraph_rollout(task: MathTask, llm: agl.LLM) -> float:
    """One episode: ``ChatOpenAI`` pointed at ``llm.endpoint`` (the model server or the proxy's route)."""
    answer = answer_question(
        task["question"], model=llm.model, base_url=llm.endpoint, api_key=llm.api_key or "unused"
    )
    return reward(answer, task["answer"])
