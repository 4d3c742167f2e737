"""The task every example agent solves, and its reward; plain Python, shared by the agents' agl entries.

Each task asks for a product of two numbers; the agents answer by calling their ``multiply`` tool and then
reporting its result. The reward is 1.0 when the last number in the answer is the product, else 0.0.
"""

from __future__ import annotations

import re
from typing import TypedDict


class MathTask(TypedDict):
    """One question and the number that answers it."""

    question: str
    answer: int


def make_tasks(n: int) -> list[MathTask]:
    """``n`` multiplication questions with their answers."""
    return [{"question": f"What is {i + 12} times {i + 7}?", "answer": (i + 12) * (i + 7)} for i in range(n)]


def multiply(a: int, b: int) -> int:
    """The product of two integers (the tool every agent offers its model)."""
    return a * b


def reward(answer: str, expected: int) -> float:
    """1.0 when the last number in ``answer`` equals ``expected``, else 0.0."""
    numbers = re.findall(r"-?\d+", answer)
    return 1.0 if numbers and int(numbers[-1]) == expected else 0.0
