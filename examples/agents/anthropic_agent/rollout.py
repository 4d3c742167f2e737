"""The agl entry of the Anthropic SDK agent: run it unchanged on the task, reward its answer.

The Anthropic client appends ``/v1/messages`` to its base URL, so the ``/v1`` that agl endpoints end in is
dropped. On the tracer path the Messages calls are captured by OpenInference's Anthropic instrumentation
(agl's own instrumentation covers the ``openai`` client): call :func:`instrument` once per process.
"""

from __future__ import annotations

from math_tasks import MathTask, reward

import agl_core as agl
from anthropic_agent.agent import answer_question


def instrument() -> None:
    """Trace Anthropic SDK calls as OpenTelemetry spans (OpenInference); agl's tracer collects them."""
    from openinference.instrumentation.anthropic import AnthropicInstrumentor

    AnthropicInstrumentor().instrument()


def uninstrument() -> None:
    """Undo :func:`instrument`."""
    from openinference.instrumentation.anthropic import AnthropicInstrumentor

    AnthropicInstrumentor().uninstrument()


@agl.rollout
def anthropic_rollout(task: MathTask, llm: agl.LLM) -> float:
    """One episode: ``anthropic.Anthropic`` pointed at ``llm.endpoint`` (model server or proxy route)."""
    base_url = llm.endpoint.removesuffix("/").removesuffix("/v1")
    answer = answer_question(
        task["question"], model=llm.model, base_url=base_url, api_key=llm.api_key or "unused"
    )
    return reward(answer, task["answer"])
