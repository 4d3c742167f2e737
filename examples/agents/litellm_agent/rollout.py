"""The agl entry of the LiteLLM agent: run it unchanged on the task, reward its answer.

``llm.endpoint`` is the model server (tracer path) or the LLM proxy's route of this rollout (proxy path:
``@agl.rollout`` hands a ``ProxyLLM`` to an ``LLM`` parameter already routed to the current attempt).
"""

from __future__ import annotations

from math_tasks import MathTask, reward

import agl_core as agl
from litellm_agent.agent import answer_question


@agl.rollout
def litellm_rollout(task: MathTask, llm: agl.LLM) -> float:
    """One episode: LiteLLM's ``openai/`` provider against ``llm.endpoint``."""
    answer = answer_question(
        task["question"], model=f"openai/{llm.model}", api_base=llm.endpoint, api_key=llm.api_key or "unused"
    )
    return reward(answer, task["answer"])


def instrument() -> None:
    """Turn on LiteLLM's own OpenTelemetry callback for this process (LiteLLM keeps it once it has run).

    Its spans go to the global tracer provider, which agl bridges into the current rollout.
    """
    import litellm

    if "otel" not in litellm.callbacks:
        litellm.callbacks.append("otel")
