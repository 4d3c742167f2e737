"""The agl entry of the LiteLLM agent: run it unchanged on the task, reward its answer.

``llm.endpoint`` is the model server (tracer path: call :func:`instrument` once) or the LLM proxy's route
of this rollout (proxy path: ``@agl.rollout`` hands a ``ProxyLLM`` to an ``LLM`` parameter already routed
to the current attempt).
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
    """Trace LiteLLM calls as OpenTelemetry spans (OpenInference's instrumentor); agl's tracer collects them.

    LiteLLM's own ``otel`` callback is not used: it writes a tool-calling reply with empty
    ``gen_ai.output.messages`` parts, so the tool call would be lost (see docs/agents.md).
    """
    from openinference.instrumentation.litellm import LiteLLMInstrumentor

    LiteLLMInstrumentor().instrument()


def uninstrument() -> None:
    """Undo :func:`instrument`."""
    from openinference.instrumentation.litellm import LiteLLMInstrumentor

    LiteLLMInstrumentor().uninstrument()
