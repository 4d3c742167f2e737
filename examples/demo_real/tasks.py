"""Arithmetic word problems from a seeded generator, with a train and a held-out split.

Each problem takes one operation (add, subtract, multiply) on numbers a 135M model cannot reliably
compute in its head; the agent may call a calculator. The held-out split is drawn from a separate random
stream, and no (numbers, operation) pair of it appears in the training split.
"""

from __future__ import annotations

import random
import re

__all__ = ["Task", "final_number", "make_tasks", "score"]

Task = dict[str, str]

_NAMES = ("Ana", "Ben", "Chloe", "Dev", "Emma", "Farid", "Grace", "Hugo", "Iris", "Jonas", "Kira", "Liam")
_ITEMS = ("apples", "stamps", "marbles", "books", "coins", "cards", "shells", "pencils")

_ADD = (
    "{n} has {a} {i} and gets {b} more. How many {i} does {n} have now?",
    "A shop sold {a} {i} on Monday and {b} {i} on Tuesday. How many {i} did it sell in total?",
)
_SUB = (
    "{n} had {a} {i} and gave away {b}. How many {i} are left?",
    "A box holds {a} {i}. {n} takes out {b} of them. How many {i} stay in the box?",
)
_MUL = (
    "{n} buys {b} bags with {a} {i} in each bag. How many {i} is that altogether?",
    "There are {b} shelves with {a} {i} on each shelf. How many {i} are there?",
)


def _problem(rng: random.Random) -> tuple[str, int, str]:
    """One problem: its text, its answer and the operation's name."""
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    op = rng.choice(("add", "sub", "mul"))
    if op == "mul":
        a, b = rng.randint(12, 99), rng.randint(3, 9)
        template, answer = rng.choice(_MUL), a * b
    else:
        a, b = rng.randint(100, 999), rng.randint(11, 99)
        template, answer = (rng.choice(_ADD), a + b) if op == "add" else (rng.choice(_SUB), a - b)
    return template.format(n=name, i=item, a=a, b=b), answer, f"{op}:{a}:{b}"


def make_tasks(n_train: int, n_heldout: int, seed: int = 0) -> tuple[list[Task], list[Task]]:
    """``n_train`` training problems and ``n_heldout`` held-out problems (disjoint, reproducible)."""
    train_rng, heldout_rng = random.Random(seed), random.Random(seed + 1_000_003)
    train: list[Task] = []
    seen: set[str] = set()
    while len(train) < n_train:
        question, answer, key = _problem(train_rng)
        if key not in seen:
            seen.add(key)
            train.append({"question": question, "answer": str(answer)})
    heldout: list[Task] = []
    while len(heldout) < n_heldout:
        question, answer, key = _problem(heldout_rng)
        if key not in seen:
            seen.add(key)
            heldout.append({"question": question, "answer": str(answer)})
    return train, heldout


_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def final_number(text: str) -> str | None:
    """The number ``text`` ends on, commas dropped; None if it holds none."""
    found = _NUMBER.findall(text)
    if not found:
        return None
    value = found[-1].replace(",", "")
    return value[:-2] if value.endswith(".0") else value


def score(answer: str, task: Task) -> float:
    """The verifiable reward: 1.0 when the answer's final number is the right one, else 0.0."""
    return 1.0 if final_number(answer) == task["answer"] else 0.0
