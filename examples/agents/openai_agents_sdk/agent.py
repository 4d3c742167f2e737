"""An OpenAI Agents SDK agent with a ``@function_tool``, run by ``Runner.run``.

``api="responses"`` (the SDK's default model, ``OpenAIResponsesModel``) or ``"chat_completions"``
(``OpenAIChatCompletionsModel``, how the SDK talks to other OpenAI-compatible servers). The SDK's own
trace export (to the OpenAI platform) is turned off for the run. No agl import.
"""

from __future__ import annotations

from typing import Literal

import math_tasks
from agents import (
    Agent,
    Model,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
)
from openai import AsyncOpenAI


@function_tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return math_tasks.multiply(a, b)


def build_agent(model: Model) -> Agent:
    """The agent: short instructions and the multiply tool."""
    return Agent(
        name="calculator",
        instructions="Use the multiply tool, then state the result.",
        tools=[multiply],
        model=model,
    )


async def answer_question(
    question: str,
    *,
    model: str,
    base_url: str,
    api_key: str,
    api: Literal["responses", "chat_completions"] = "responses",
    stream: bool = False,
) -> str:
    """Run the agent on ``question`` (``Runner.run``, or ``Runner.run_streamed`` when ``stream``)."""
    client = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=1)
    llm: Model = (
        OpenAIResponsesModel(model=model, openai_client=client)
        if api == "responses"
        else OpenAIChatCompletionsModel(model=model, openai_client=client)
    )
    config = RunConfig(tracing_disabled=True)
    try:
        if stream:
            streamed = Runner.run_streamed(build_agent(llm), question, max_turns=4, run_config=config)
            async for _event in streamed.stream_events():
                pass  # a UI would render the events here
            return str(streamed.final_output)
        result = await Runner.run(build_agent(llm), question, max_turns=4, run_config=config)
        return str(result.final_output)
    finally:
        await client.close()
