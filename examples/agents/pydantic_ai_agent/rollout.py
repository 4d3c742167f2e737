"""The agl entry of the pydantic-ai agent; ``instrument`` turns pydantic-ai's own tracing on."""

from __future__ import annotations

from math_tasks import MathTask, reward

import agl_core as agl
from pydantic_ai_agent.agent import answer_question


@agl.rollout
def pydantic_ai_rollout(task: MathTask, llm: agl.LLM) -> float:
    """One episode against ``llm.endpoint`` (the model server or the proxy's route)."""
    answer = answer_question(
        task["question"], model=llm.model, base_url=llm.endpoint, api_key=llm.api_key or "x"
    )
    return reward(answer, task["answer"])


def instrument() -> None:
    """pydantic-ai's documented switch: every agent traces itself with OpenTelemetry GenAI spans."""
    from pydantic_ai import Agent

    Agent.instrument_all()


def uninstrument() -> None:
    from pydantic_ai import Agent

    Agent.instrument_all(False)
