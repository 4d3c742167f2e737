"""An Agno ``Agent`` as its docs write one: an OpenAI model pointed at ``base_url``, one function tool."""

from __future__ import annotations

from agno.agent import Agent
from agno.models.openai import OpenAIChat


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def answer_question(question: str, *, model: str, base_url: str, api_key: str) -> str:
    """Run the agent on ``question``; its final answer."""
    agent = Agent(
        model=OpenAIChat(id=model, base_url=base_url, api_key=api_key),
        tools=[multiply],
        instructions="Use the multiply tool, then state the result.",
    )
    return str(agent.run(question).content)
