"""A smolagents ToolCallingAgent as its docs write one: an OpenAI-compatible server model, one tool."""

from __future__ import annotations

from smolagents import OpenAIServerModel, ToolCallingAgent, tool


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: the first factor.
        b: the second factor.
    """
    return a * b


def answer_question(question: str, *, model: str, base_url: str, api_key: str) -> str:
    """Ask the agent; it calls ``multiply``, then ``final_answer`` with the product."""
    server_model = OpenAIServerModel(model_id=model, api_base=base_url, api_key=api_key)
    agent = ToolCallingAgent(tools=[multiply], model=server_model, max_steps=3, verbosity_level=0)
    return str(agent.run(question))
