"""The agl entry of the Anthropic SDK agent: run it unchanged on the task, reward its answer.

The Anthropic client appends ``/v1/messages`` to its base URL, so the ``/v1`` that agl endpoints end in is
dropped. Tracer path: the SDK traces its own calls with OpenTelemetry (span ``anthropic.messages.create``,
GenAI attributes) through the global provider agl bridges; :func:`instrument` asks it to record the
messages too (``ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content``, read when a client is created).
"""

from __future__ import annotations

import os

from math_tasks import MathTask, reward

import agl_core as agl
from anthropic_agent.agent import answer_question

CONTENT_MODE_ENV = "ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE"


def instrument() -> None:
    """Have Anthropic clients created from now on record prompts and replies on their spans."""
    os.environ[CONTENT_MODE_ENV] = "content"


def uninstrument() -> None:
    """Undo :func:`instrument` (back to the SDK's default, metadata only)."""
    os.environ.pop(CONTENT_MODE_ENV, None)


@agl.rollout
def anthropic_rollout(task: MathTask, llm: agl.LLM) -> float:
    """One episode: ``anthropic.Anthropic`` pointed at ``llm.endpoint`` (model server or proxy route)."""
    base_url = llm.endpoint.removesuffix("/").removesuffix("/v1")
    answer = answer_question(
        task["question"], model=llm.model, base_url=base_url, api_key=llm.api_key or "unused"
    )
    return reward(answer, task["answer"])
