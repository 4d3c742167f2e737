"""The demo's toy task: answer with digits only. Train and held-out prompts never share a number."""

from __future__ import annotations

import random

__all__ = ["Task", "digit_share", "make_tasks"]

Task = dict[str, str]

_TEMPLATES = (
    "Reply with digits only, like {n}.",
    "Answer with a number only, for example {n}.",
)


def digit_share(text: str) -> float:
    """The verifiable reward: the share of the reply's non-space characters that are digits (0 if empty)."""
    chars = [c for c in text if not c.isspace()]
    return sum(c.isdigit() for c in chars) / len(chars) if chars else 0.0


def make_tasks(n_train: int, n_heldout: int, seed: int = 0) -> tuple[list[Task], list[Task]]:
    """``n_train`` training tasks and ``n_heldout`` held-out tasks whose example numbers are all distinct."""
    rng = random.Random(seed)
    numbers = rng.sample(range(100, 1000), n_train + n_heldout)
    tasks = [
        {"question": _TEMPLATES[i % len(_TEMPLATES)].format(n=n), "example": str(n)}
        for i, n in enumerate(numbers)
    ]
    return tasks[:n_train], tasks[n_train:]
