"""The agl entries of the LangChain ``create_agent`` agent, invoked and streamed."""

from __future__ import annotations

from math_tasks import MathTask, reward

import agl_core as agl
from langchain_agent.agent import answer_question


@agl.rollout
def create_agent_rollout(task: MathTask, llm: agl.LLM) -> float:
    """One episode, ``agent.invoke``."""
    answer = answer_question(
        task["question"], model=llm.model, base_url=llm.endpoint, api_key=llm.api_key or "x"
    )
    return reward(answer, task["answer"])


@agl.rollout
def create_agent_stream_rollout(task: MathTask, llm: agl.LLM) -> float:
    """One episode, ``agent.stream(stream_mode="messages")`` (the model streams its tokens)."""
    answer = answer_question(
        task["question"], model=llm.model, base_url=llm.endpoint, api_key=llm.api_key or "x", stream=True
    )
    return reward(answer, task["answer"])


def instrument() -> None:
    """Turn on LangChain's own tracing (``openinference-instrumentation-langchain``)."""
    from openinference.instrumentation.langchain import LangChainInstrumentor

    LangChainInstrumentor().instrument()


def uninstrument() -> None:
    """Undo :func:`instrument`."""
    from openinference.instrumentation.langchain import LangChainInstrumentor

    LangChainInstrumentor().uninstrument()
