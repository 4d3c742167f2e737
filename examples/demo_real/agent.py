"""The calculator agent: an ordinary ``openai`` client, a plain-text calculator call, a checked answer.

The model reads the word problem (after one worked example in the chat) and writes the calculation as a
line ``CALC: <expression>``. The agent runs the calculator on it (numbers and ``+ - * / ( )`` only) and
answers with the result; a reply without a call is taken as a direct answer (its last number). The reward
is 1 when the answer is right (``tasks.score``). So the model's job is to turn the wording into the right
calculation; the tool does the arithmetic a 135M model gets wrong. SmolLM2-135M does not produce the chat
template's structured tool calls, so the call is a line of text that the agent parses. One model call per
episode keeps the CPU cost of an episode low.
"""

from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass
from typing import Any

from openai import AsyncOpenAI
from tasks import Task, score

from agl_core.litagent import rollout
from agl_core.types import LLM, NamedResources

__all__ = ["EXAMPLE", "SYSTEM", "Outcome", "calculator", "calculator_agent", "solve"]

SYSTEM = "Reply with the calculation for a calculator, as CALC: <expression>."
#: One worked example, shown as an earlier turn of the chat.
EXAMPLE = (
    {"role": "user", "content": "Mia has 45 cups and buys 18 more. How many cups does Mia have now?"},
    {"role": "assistant", "content": "CALC: 45 + 18"},
)
MAX_TOKENS = 16

_CALL = re.compile(r"CALC:\s*([-+*/(). \d]+)")
_OPS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left), _eval(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand)
    raise ValueError("unsupported expression")


def calculator(expression: str) -> str | None:
    """The tool: the value of an arithmetic expression as text, or None when it cannot be evaluated."""
    try:
        value = _eval(ast.parse(expression.strip(), mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError, OverflowError):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


@dataclass
class Outcome:
    """One episode: the model's reply, the calculator call (if any), the answer, reward and tokens."""

    reply: str
    call: str | None
    answer: str
    reward: float
    tokens: int


async def solve(task: Task, client: AsyncOpenAI, model: str, temperature: float | None = None) -> Outcome:
    """Run one episode of ``task`` against ``model`` behind ``client``."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        *EXAMPLE,
        {"role": "user", "content": task["question"]},
    ]
    extra: dict[str, Any] = {} if temperature is None else {"temperature": temperature}
    reply = await client.chat.completions.create(
        model=model, messages=messages, max_tokens=MAX_TOKENS, **extra
    )
    text = reply.choices[0].message.content or ""
    tokens = reply.usage.completion_tokens if reply.usage else 0
    found = _CALL.search(text)
    call = found.group(1).strip() if found else None
    answer = (calculator(call) if call else None) or ("" if call else text)
    return Outcome(text, call, answer, score(answer, task), tokens)


@rollout
async def calculator_agent(task: Task, llm: LLM, resources: NamedResources) -> float:
    """The rollout: reach the served model (``main_llm``) through the LLM proxy; return the reward."""
    client = AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "unused", max_retries=1, timeout=900)
    async with client:
        return (await solve(task, client, llm.model)).reward
