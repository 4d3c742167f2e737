"""A LlamaIndex ``FunctionAgent`` as its docs write one: ``OpenAILike`` (an OpenAI-compatible server whose
model name OpenAI does not know), one function tool."""

from __future__ import annotations

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.llms.openai_like import OpenAILike


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


async def answer_question(question: str, *, model: str, base_url: str, api_key: str) -> str:
    """Run the agent on ``question``; its final answer."""
    llm = OpenAILike(
        model=model, api_base=base_url, api_key=api_key, is_chat_model=True, is_function_calling_model=True
    )
    agent = FunctionAgent(
        tools=[multiply], llm=llm, system_prompt="Use the multiply tool, then state the result."
    )
    return str(await agent.run(user_msg=question))
