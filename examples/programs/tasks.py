"""The two tasks every program example runs, a scripted model for them, and their reward.

* the **plain** task asks the model to say a phrase back;
* the **tool** task asks for a product. The scripted model computes it with a tool -- the program's
  function tool (``multiply``), or its shell tool (one taking a ``command``: ``echo $((12 * 7))``; Codex's
  JavaScript ``exec`` tool) -- only when the system prompt says ``Use your tools for arithmetic.``, and
  guesses wrong otherwise; so the prompt matters and a prompt optimization step has something to find.

An agent that can only finish through its shell tool (mini-swe-agent) gets its answers as a submit command
(``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; echo '<answer>'``). ``scripted_model`` is the policy of the
local fake model server (`agl_testing.fake_openai`) for OpenAI chat requests, which is what every
proxy API is translated to.
"""

from __future__ import annotations

import re
from typing import Any

from agl_testing.fake_openai import Reply, ToolCall

PLAIN_TASK = {
    "kind": "plain",
    "question": "Say exactly: hello from agl",
    "expected": "hello from agl",
    "tools": False,
}
TOOL_TASK = {"kind": "tool", "question": "What is 12 times 7?", "expected": "84", "tools": True}
TASKS = [PLAIN_TASK, TOOL_TASK]

USE_TOOLS = "Use your tools for arithmetic."
"""The instruction that makes the scripted model compute with a tool (agents' own prompts never say it)."""

PROMPTS = ["Answer briefly.", f"Answer briefly. {USE_TOOLS}"]
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


def _tool_specs(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Offered tools by name -> their parameter properties."""
    specs = {}
    for tool in request.get("tools") or []:
        spec = tool.get("function", tool)
        specs[str(spec.get("name"))] = (spec.get("parameters") or {}).get("properties") or {}
    return specs


def _tool_call(specs: dict[str, dict[str, Any]], a: int, b: int) -> Reply | None:
    """A call computing ``a * b`` with a tool this agent offers: a function taking ``a`` and ``b``, Codex's
    JavaScript ``exec`` tool, or a shell tool taking a ``command``; None when it offers none of those."""
    for name, properties in specs.items():
        if {"a", "b"} <= set(properties):
            return Reply(tool_calls=[ToolCall(name, {"a": a, "b": b})])
    command = f"echo $(({a} * {b}))"
    if "functions__exec" in specs:  # Codex: a free-form tool whose input is JavaScript calling its shell
        code = f"const r = await tools.exec_command({{cmd: {command!r}}}); text(JSON.stringify(r));"
        return Reply(content="Computing.", tool_calls=[ToolCall("functions__exec", {"input": code})])
    shells = [name for name, properties in specs.items() if "command" in properties]
    if not shells:
        return None
    shell = next((name for name in shells if name.lower() in ("bash", "shell")), shells[0])
    arguments = {"command": command}
    if "description" in specs[shell]:
        arguments["description"] = "Multiply two numbers"
    return Reply(content="Computing.", tool_calls=[ToolCall(shell, arguments)])


def _answer(specs: dict[str, dict[str, Any]], text: str) -> Reply:
    """The final answer; an agent whose only tool is a shell (mini-swe-agent) submits it through that."""
    if len(specs) == 1 and "command" in next(iter(specs.values())):
        command = f"echo {SUBMIT}; echo '{text}'"
        return Reply(content="Submitting.", tool_calls=[ToolCall(next(iter(specs)), {"command": command})])
    return Reply(content=text)


def scripted_model(request: dict[str, Any]) -> Reply:
    """The fake model's policy (see the module docstring), for function-tool and shell-tool agents."""
    turns = [
        m for m in request.get("messages", []) if m.get("role") != "system"
    ]  # Claude Code adds some late
    specs = _tool_specs(request)
    user = "\n".join(_text(m.get("content")) for m in turns if m.get("role") == "user")
    product = _PRODUCT.search(user)
    if turns and turns[-1].get("role") == "tool":
        result = _text(turns[-1].get("content"))
        if product is not None:
            value = str(int(product.group(1)) * int(product.group(2)))
            return _answer(specs, f"The answer is {value if value in result else '?'}.")
        return _answer(specs, "Done.")
    if product is not None:
        a, b = int(product.group(1)), int(product.group(2))
        if USE_TOOLS in _system_text(request):
            call = _tool_call(specs, a, b)
            if call is not None:
                return call
        return _answer(specs, "I guess 42.")
    said = _SAY.search(user)
    return _answer(specs, said.group(1).strip() if said else user)


def reward(answer: str, expected: str) -> float:
    """1.0 when the answer's last number is the expected number, or when it contains the expected phrase."""
    if expected.lstrip("-").isdigit():
        numbers = _NUMBERS.findall(answer)
        return 1.0 if numbers and numbers[-1] == expected else 0.0
    return 1.0 if expected in answer else 0.0
