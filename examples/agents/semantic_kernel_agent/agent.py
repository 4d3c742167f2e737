"""A Semantic Kernel ``ChatCompletionAgent`` as its docs write one: an OpenAI chat service, one plugin."""

from __future__ import annotations

from typing import Annotated

from openai import AsyncOpenAI
from semantic_kernel.agents import ChatCompletionAgent
from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion
from semantic_kernel.functions import kernel_function


class MathPlugin:
    """The calculator plugin."""

    @kernel_function(description="Multiply two integers.")
    def multiply(self, a: Annotated[int, "the first factor"], b: Annotated[int, "the second factor"]) -> int:
        """Multiply two integers."""
        return a * b


async def answer_question(question: str, *, model: str, base_url: str, api_key: str) -> str:
    """Ask the agent; Semantic Kernel calls ``multiply`` automatically and the agent states the product."""
    service = OpenAIChatCompletion(
        ai_model_id=model, async_client=AsyncOpenAI(base_url=base_url, api_key=api_key)
    )
    agent = ChatCompletionAgent(
        service=service,
        name="calculator",
        instructions="Use the multiply tool, then state the result.",
        plugins=[MathPlugin()],
    )
    response = await agent.get_response(messages=question)
    return str(response.content)
