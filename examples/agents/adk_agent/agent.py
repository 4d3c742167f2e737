"""A Google ADK agent as its docs write one for a non-Gemini model: ``LiteLlm``, one function tool."""

from __future__ import annotations

from google.adk.agents import Agent
from google.adk.models.lite_llm import LiteLlm
from google.adk.runners import InMemoryRunner
from google.genai import types


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


async def answer_question(question: str, *, model: str, base_url: str, api_key: str) -> str:
    """Run the agent on ``question`` in a fresh session; the last text it produced."""
    agent = Agent(
        name="calculator",
        model=LiteLlm(model=f"openai/{model}", api_base=base_url, api_key=api_key),
        instruction="Use the multiply tool, then state the result.",
        tools=[multiply],
    )
    runner = InMemoryRunner(agent=agent, app_name="math")
    session = await runner.session_service.create_session(app_name="math", user_id="user")
    message = types.Content(role="user", parts=[types.Part(text=question)])
    text = ""
    async for event in runner.run_async(user_id="user", session_id=session.id, new_message=message):
        if event.content and event.content.parts:
            text = "".join(part.text or "" for part in event.content.parts) or text
    return text
