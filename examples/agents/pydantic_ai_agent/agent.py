"""A pydantic-ai agent as its docs write one: an OpenAI-compatible model, one plain tool. No agl import."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider


def answer_question(question: str, *, model: str, base_url: str, api_key: str) -> str:
    """Ask the agent; it calls ``multiply`` and reports the product."""
    chat_model = OpenAIChatModel(model, provider=OpenAIProvider(base_url=base_url, api_key=api_key))
    agent = Agent(chat_model, system_prompt="Use the multiply tool, then state the product.")

    @agent.tool_plain
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    return agent.run_sync(question).output
