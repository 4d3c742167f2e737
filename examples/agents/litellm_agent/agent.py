"""A tool-calling loop written with LiteLLM only: ``litellm.completion`` until the model stops calling tools.

No agl import: the agl entry (``rollout.py``) passes the endpoint and model it was given.
"""

from __future__ import annotations

import json
from typing import Any

import litellm
from math_tasks import multiply

MAX_TURNS = 4
MULTIPLY_TOOL = {
    "type": "function",
    "function": {
        "name": "multiply",
        "description": "Multiply two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}


def answer_question(question: str, *, model: str, api_base: str, api_key: str) -> str:
    """Ask ``model`` (a LiteLLM model string: ``openai/<name>``), run its tool calls, return the answer."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Use the multiply tool, then state the result."},
        {"role": "user", "content": question},
    ]
    for _ in range(MAX_TURNS):
        response = litellm.completion(
            model=model, api_base=api_base, api_key=api_key, messages=messages, tools=[MULTIPLY_TOOL]
        )
        message = response.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = multiply(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": str(result)})
    return ""
