"""The fake model's policy for the example agents: call ``multiply`` on the question's numbers, then answer.

It reads an OpenAI chat-completions request (what ``FakeOpenAIServer`` hands its script). A request whose
last message is a tool result gets the final answer; any other request gets one ``multiply`` tool call.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agl_testing.fake_openai import Reply, ToolCall

_NUMBERS = re.compile(r"-?\d+")


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def calculator_model(request: dict[str, Any]) -> Reply:
    """Reply to one chat request: a tool call for a new question, the tool's result as the final answer."""
    last = request["messages"][-1]
    if last.get("role") == "tool":
        return Reply(content=f"The answer is {_text(last.get('content')).strip()}.")
    numbers = [int(n) for n in _NUMBERS.findall(_text(last.get("content")))]
    if len(numbers) < 2:
        return Reply(content="Please ask me to multiply two numbers.")
    return Reply(tool_calls=[ToolCall("multiply", {"a": numbers[0], "b": numbers[1]})])


def final_answer_model(request: dict[str, Any]) -> Reply:
    """The same policy for agents that end with a ``final_answer`` tool the model names in its text
    (smolagents): after the tool ran (its result comes back as the last message), name that tool with the
    product; before, call ``multiply``."""
    messages = request["messages"]
    if any(m.get("role") == "assistant" for m in messages):
        numbers = _NUMBERS.findall(_text(messages[-1].get("content")))
        answer = f"The answer is {numbers[-1] if numbers else '?'}."
        return Reply(content=json.dumps({"name": "final_answer", "arguments": {"answer": answer}}))
    return calculator_model(request)


def dspy_model(request: dict[str, Any]) -> Reply:
    """The policy in DSPy's ChatAdapter format: the product of the question's two numbers as ``answer``."""
    question = _text(request["messages"][-1].get("content")).split("question ## ]]")[-1]
    numbers = [int(n) for n in _NUMBERS.findall(question)]
    product = numbers[0] * numbers[1] if len(numbers) >= 2 else 0
    return Reply(content=f"[[ ## answer ## ]]\n{product}\n\n[[ ## completed ## ]]")
