"""A tool-use loop on the Anthropic SDK: ``messages.create`` until ``stop_reason`` is not ``tool_use``.

No agl import: the agl entry (``rollout.py``) passes the endpoint and model it was given.
"""

from __future__ import annotations

from typing import Any

import anthropic
from math_tasks import multiply

MAX_TURNS = 4
MULTIPLY_TOOL = {
    "name": "multiply",
    "description": "Multiply two integers.",
    "input_schema": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
}


def answer_question(question: str, *, model: str, base_url: str, api_key: str) -> str:
    """Ask ``model`` through the Messages API, run its ``tool_use`` blocks, return its final text."""
    client = anthropic.Anthropic(base_url=base_url, api_key=api_key, max_retries=1)
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    try:
        for _ in range(MAX_TURNS):
            response = client.messages.create(
                model=model,
                max_tokens=256,
                system="Use the multiply tool, then state the result.",
                tools=[MULTIPLY_TOOL],
                messages=messages,
            )
            if response.stop_reason != "tool_use":
                return "".join(block.text for block in response.content if block.type == "text")
            messages.append({"role": "assistant", "content": response.content})
            results = [
                {"type": "tool_result", "tool_use_id": block.id, "content": str(multiply(**block.input))}
                for block in response.content
                if block.type == "tool_use"
            ]
            messages.append({"role": "user", "content": results})
    finally:
        client.close()
    return ""
