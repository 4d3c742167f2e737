"""A Haystack ``Agent`` as its docs write one: ``OpenAIChatGenerator`` and one ``@tool`` function."""

from __future__ import annotations

from haystack.components.agents import Agent
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.dataclasses import ChatMessage
from haystack.tools import tool
from haystack.utils import Secret


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def answer_question(question: str, *, model: str, base_url: str, api_key: str) -> str:
    """Run the agent on ``question``; the text of its last message."""
    generator = OpenAIChatGenerator(model=model, api_base_url=base_url, api_key=Secret.from_token(api_key))
    agent = Agent(
        chat_generator=generator,
        tools=[multiply],
        system_prompt="Use the multiply tool, then state the result.",
    )
    agent.warm_up()
    result = agent.run(messages=[ChatMessage.from_user(question)])
    return str(result["messages"][-1].text)
