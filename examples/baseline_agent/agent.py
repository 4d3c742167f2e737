"""A small tool-using agent: it asks the model, runs the calculator the model calls, and asks again.

Written with the plain ``openai`` client and no agl-specific code inside the loop: agl traces the model
calls (with token ids) by instrumenting ``openai``; the returned float becomes the rollout's reward.
"""

from __future__ import annotations

import ast
import json
import operator
import re
from collections.abc import Callable
from typing import Any, TypedDict

import openai

import agl_core as agl

MAX_TURNS = 3
SYSTEM_PROMPT = (
    "You are a careful assistant. Use the calculator tool for arithmetic, then answer in one sentence."
)
CALCULATOR_TOOL = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression with + - * / ** and parentheses.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. '12 * (3 + 4)'"}},
            "required": ["expression"],
        },
    },
}

_OPERATORS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


class MathTask(TypedDict):
    """One task: a question and the number that answers it."""

    question: str
    answer: float


def calculate(expression: str) -> float:
    """Evaluate an arithmetic expression without ``eval`` (numbers and + - * / ** only)."""

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return float(_OPERATORS[type(node.op)](walk(node.left), walk(node.right)))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return float(_OPERATORS[type(node.op)](walk(node.operand)))
        raise ValueError(f"unsupported expression: {ast.dump(node)}")

    return walk(ast.parse(expression, mode="eval"))


def run_tool(name: str, arguments: str) -> str:
    """Run one tool call and return its result as the text the model sees."""
    if name != "calculator":
        return f"error: unknown tool {name!r}"
    try:
        return f"{calculate(json.loads(arguments)['expression']):g}"
    except (ValueError, KeyError, SyntaxError, ZeroDivisionError, json.JSONDecodeError) as exc:
        return f"error: {exc}"


def final_number(text: str) -> float | None:
    """The last number in the model's answer."""
    numbers = re.findall(r"-?\d+(?:\.\d+)?", text)
    return float(numbers[-1]) if numbers else None


@agl.rollout
def calculator_agent(task: MathTask, llm: agl.LLM) -> float:
    """Answer ``task`` with the model and the calculator; reward 1 for the right number, else 0."""
    client = openai.OpenAI(base_url=llm.endpoint, api_key=llm.api_key or "not-needed", max_retries=1)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task["question"]},
    ]
    answer = ""
    try:
        for _ in range(MAX_TURNS):
            response = client.chat.completions.create(
                model=llm.model, messages=messages, tools=[CALCULATOR_TOOL], **llm.sampling_parameters
            )
            message = response.choices[0].message
            if not message.tool_calls:
                answer = message.content or ""
                break
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                result = run_tool(call.function.name, call.function.arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    finally:
        client.close()
    value = final_number(answer)
    return 1.0 if value is not None and abs(value - task["answer"]) < 1e-6 else 0.0
