"""The agl entry of the LlamaIndex agent."""

from __future__ import annotations

from math_tasks import MathTask, reward

import agl_core as agl
from llama_index_agent.agent import answer_question


@agl.rollout
async def llama_index_rollout(task: MathTask, llm: agl.LLM) -> float:
    """One episode against ``llm.endpoint`` (the model server or the proxy's route)."""
    answer = await answer_question(
        task["question"], model=llm.model, base_url=llm.endpoint, api_key=llm.api_key or "x"
    )
    return reward(answer, task["answer"])


def instrument() -> None:
    """Turn on LlamaIndex's own tracing (``openinference-instrumentation-llama-index``)."""
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    LlamaIndexInstrumentor().instrument()


def uninstrument() -> None:
    """Undo :func:`instrument`."""
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    LlamaIndexInstrumentor().uninstrument()
