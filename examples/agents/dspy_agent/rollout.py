"""The agl entry of the DSPy program (sync: DSPy's settings belong to the thread that configured them)."""

from __future__ import annotations

from math_tasks import MathTask, reward

import agl_core as agl
from dspy_agent.agent import answer_question


@agl.rollout
def dspy_rollout(task: MathTask, llm: agl.LLM) -> float:
    """One episode against ``llm.endpoint`` (the model server or the proxy's route)."""
    answer = answer_question(
        task["question"], model=llm.model, base_url=llm.endpoint, api_key=llm.api_key or "x"
    )
    return reward(answer, task["answer"])


def instrument() -> None:
    """Turn on DSPy's own tracing (``openinference-instrumentation-dspy``)."""
    from openinference.instrumentation.dspy import DSPyInstrumentor

    DSPyInstrumentor().instrument()


def uninstrument() -> None:
    """Undo :func:`instrument`."""
    from openinference.instrumentation.dspy import DSPyInstrumentor

    DSPyInstrumentor().uninstrument()
