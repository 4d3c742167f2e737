"""A CrewAI crew as its docs write one: one agent with one tool, one task, ``kickoff``. No agl import."""

from __future__ import annotations

from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool


@tool("multiply")
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def answer_question(question: str, *, model: str, base_url: str, api_key: str) -> str:
    """Run a one-agent crew on ``question``; the crew's final answer."""
    llm = LLM(model=f"openai/{model}", base_url=base_url, api_key=api_key)
    calculator = Agent(
        role="Calculator",
        goal="Answer arithmetic questions exactly",
        backstory="Use the multiply tool, then state the result.",
        tools=[multiply],
        llm=llm,
        verbose=False,
    )
    task = Task(description=question, expected_output="The product as a number.", agent=calculator)
    return str(Crew(agents=[calculator], tasks=[task], verbose=False).kickoff().raw)
