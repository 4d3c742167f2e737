"""The agl entry of the Haystack agent."""

from __future__ import annotations

from math_tasks import MathTask, reward

import agl_core as agl
from haystack_agent.agent import answer_question


@agl.rollout
def haystack_rollout(task: MathTask, llm: agl.LLM) -> float:
    """One episode against ``llm.endpoint`` (the model server or the proxy's route)."""
    answer = answer_question(
        task["question"], model=llm.model, base_url=llm.endpoint, api_key=llm.api_key or "x"
    )
    return reward(answer, task["answer"])


def instrument() -> None:
    """Turn on Haystack's own tracing (``openinference-instrumentation-haystack``)."""
    from openinference.instrumentation.haystack import HaystackInstrumentor

    HaystackInstrumentor().instrument()


def uninstrument() -> None:
    """Undo :func:`instrument`."""
    from openinference.instrumentation.haystack import HaystackInstrumentor

    HaystackInstrumentor().uninstrument()
