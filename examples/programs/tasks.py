"""The two tasks every program example runs, a scripted model for them, and their reward.

* the **plain** task asks the model to say a phrase back;
* the **tool** task asks for a product. The scripted model computes it with a tool -- the program's
  function tool (``multiply``), or its shell tool (one taking a ``command``: ``echo $((12 * 7))``) -- only
  when the system prompt tells it to use its tools, and guesses wrong otherwise; so the prompt matters and
  a prompt optimization step has something to find.

An agent that can only finish through its shell tool (mini-swe-agent) gets its answers as a submit command
(``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; echo '<answer>'``). ``scripted_model`` is the policy of the
local fake model server (`agl_core.testing.fake_openai`) for OpenAI chat requests, which is what every
proxy API is translated to.
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

SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
"""What a shell agent's submit command prints first (mini-swe-agent's convention); the rest is the answer."""

_NUMBERS = re.compile(r"-?\d+")
_PRODUCT = re.compile(r"What is (-?\d+) times (-?\d+)\?")
_SAY = re.compile(r"Say exactly: ([^\n]+)")


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def _system_text(request: dict[str, Any]) -> str:
    return " ".join(_text(m.get("content")) for m in request.get("messages", []) if m.get("role") == "system")


def _tools(request: dict[str, Any]) -> tuple[str | None, str | None]:
    """The name of an offered shell tool (one taking a ``command``) and of any other function tool."""
    shell = function = None
    for tool in request.get("tools") or []:
        spec = tool.get("function", tool)
        properties = (spec.get("parameters") or {}).get("properties") or {}
        if "command" in properties:
            shell = shell or spec.get("name")
        else:
            function = function or spec.get("name")
    return shell, function


def _answer(shell: str | None, text: str) -> Reply:
    """The final answer: said, or submitted through the shell tool when the agent only ends that way."""
    if shell is None:
        return Reply(content=text)
    return Reply(
        content="Submitting.", tool_calls=[ToolCall(shell, {"command": f"echo {SUBMIT}; echo '{text}'"})]
    )


def scripted_model(request: dict[str, Any]) -> Reply:
    """The fake model's policy (see the module docstring) for function-tool and shell-tool agents."""
    messages = request.get("messages", [])
    shell, function = _tools(request)
    user = "\n".join(_text(m.get("content")) for m in messages if m.get("role") == "user")
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        numbers = _NUMBERS.findall(_text(last.get("content")))
        return _answer(shell, f"The answer is {numbers[-1] if numbers else '?'}.")
    product = _PRODUCT.search(user)
    if product is not None:
        a, b = int(product.group(1)), int(product.group(2))
        if "tool" in _system_text(request).lower():
            if function is not None:
                return Reply(tool_calls=[ToolCall(function, {"a": a, "b": b})])
            if shell is not None:
                return Reply(
                    content="Computing.", tool_calls=[ToolCall(shell, {"command": f"echo $(({a} * {b}))"})]
                )
        return _answer(shell, "I guess 42.")
    said = _SAY.search(user)
    return _answer(shell, said.group(1).strip() if said else user)


def reward(answer: str, expected: str) -> float:
    """1.0 when the answer's last number is the expected number, or when it contains the expected phrase."""
    if expected.lstrip("-").isdigit():
        numbers = _NUMBERS.findall(answer)
        return 1.0 if numbers and numbers[-1] == expected else 0.0
    return 1.0 if expected in answer else 0.0
