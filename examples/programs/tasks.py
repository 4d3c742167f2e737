"""The two tasks every program example runs, a scripted model for them, and their reward.

* the **plain** task asks the model to say a phrase back (no tools);
* the **tool** task asks for a product; the program offers a ``multiply`` tool, and the scripted model
  calls it only when the system prompt tells it to use its tools -- so the prompt matters and a prompt
  optimization step has something to find.

``scripted_model`` is the policy of the local fake model server (`agl_core.testing.fake_openai`) for
OpenAI chat requests, which is what every proxy API is translated to.
"""

from __future__ import annotations

import re
from typing import Any

from agl_core.testing.fake_openai import Reply, ToolCall

PLAIN_TASK = {
    "kind": "plain",
    "question": "Say exactly: hello from agl",
    "expected": "hello from agl",
    "tools": False,
}
TOOL_TASK = {"kind": "tool", "question": "What is 12 times 7?", "expected": "84", "tools": True}
TASKS = [PLAIN_TASK, TOOL_TASK]

PROMPTS = ["Answer briefly.", "Answer briefly. Use your tools for arithmetic."]
"""Candidate system prompts: only the second makes the scripted model call its tool."""

_NUMBERS = re.compile(r"-?\d+")


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def _system_text(request: dict[str, Any]) -> str:
    return " ".join(_text(m.get("content")) for m in request.get("messages", []) if m.get("role") == "system")


def scripted_model(request: dict[str, Any]) -> Reply:
    """A tool result gets the final answer; a product question with tools offered gets a tool call when the
    system prompt says to use tools (else a wrong guess); anything else is echoed."""
    messages = request.get("messages", [])
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return Reply(content=f"The answer is {_text(last.get('content')).strip()}.")
    question = _text(last.get("content"))
    numbers = [int(n) for n in _NUMBERS.findall(question)]
    tools = [t.get("function", t).get("name") for t in request.get("tools") or []]
    if len(numbers) == 2 and "times" in question:
        if tools and "tool" in _system_text(request).lower():
            return Reply(tool_calls=[ToolCall(str(tools[0]), {"a": numbers[0], "b": numbers[1]})])
        return Reply(content="I guess 42.")
    return Reply(content=question.removeprefix("Say exactly: "))


def reward(answer: str, expected: str) -> float:
    """1.0 when the answer's last number is the expected number, or when it contains the expected phrase."""
    if expected.lstrip("-").isdigit():
        numbers = _NUMBERS.findall(answer)
        return 1.0 if numbers and numbers[-1] == expected else 0.0
    return 1.0 if expected in answer else 0.0
