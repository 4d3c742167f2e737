"""An AutoGen AgentChat ``AssistantAgent`` with a tool, reflecting on the tool's result (a second model turn).

No agl import: the agl entry (``rollout.py``) passes the endpoint and model it was given.
"""

from __future__ import annotations

import math_tasks
from autogen_agentchat.agents import AssistantAgent
from autogen_core.models import ModelFamily, ModelInfo
from autogen_ext.models.openai import OpenAIChatCompletionClient

# What AutoGen needs to know about a model it has no built-in entry for (any self-hosted model).
MODEL_INFO = ModelInfo(
    vision=False,
    function_calling=True,
    json_output=False,
    family=ModelFamily.UNKNOWN,
    structured_output=False,
)


async def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return math_tasks.multiply(a, b)


async def answer_question(question: str, *, model: str, base_url: str, api_key: str) -> str:
    """Run the assistant on ``question`` and return its last message."""
    client = OpenAIChatCompletionClient(
        model=model, base_url=base_url, api_key=api_key, model_info=MODEL_INFO, max_retries=1
    )
    agent = AssistantAgent(
        "calculator",
        model_client=client,
        tools=[multiply],
        system_message="Use the multiply tool, then state the result.",
        reflect_on_tool_use=True,
    )
    try:
        result = await agent.run(task=question)
    finally:
        await client.close()
    return str(result.messages[-1].content)
