"""LangChain 1.x ``create_agent`` as its docs write one: ``ChatOpenAI``, one tool, invoked or streamed."""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def answer_question(question: str, *, model: str, base_url: str, api_key: str, stream: bool = False) -> str:
    """Run the agent on ``question``; ``stream`` streams the model's tokens (``stream_mode="messages"``)."""
    agent = create_agent(
        model=ChatOpenAI(model=model, base_url=base_url, api_key=api_key, max_retries=1),
        tools=[multiply],
        system_prompt="Use the multiply tool, then state the result.",
    )
    request = {"messages": [{"role": "user", "content": question}]}
    if not stream:
        return str(agent.invoke(request)["messages"][-1].content)
    text = ""
    for chunk, metadata in agent.stream(request, stream_mode="messages"):
        if metadata.get("langgraph_node") == "model" and isinstance(chunk.content, str):
            text += chunk.content
    return text
