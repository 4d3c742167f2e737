"""How a program reports its reward: a reward file (``agl reward`` writes it) or a last JSON line on stdout.

Both hold a number (``0.75``) or a JSON object with a numeric ``"reward"`` (``{"reward": 0.75}``). The
file, ``$AGL_REWARD_FILE``, wins over stdout; a stdout whose last non-empty line is not such an object
reports no reward (the program's ordinary output is never mistaken for one).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

__all__ = ["ProgramRewardError", "parse_reward", "read_reward_file", "reward_from_stdout"]


class ProgramRewardError(ValueError):
    """A reported reward is not a finite number or ``{"reward": <number>}``."""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def parse_reward(text: str, *, source: str) -> float:
    """The reward in ``text``: a number or ``{"reward": <number>}``.

    Raises:
        ProgramRewardError: anything else, naming ``source`` and what it held.
    """
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict):
        value = value.get("reward")
    number = _number(value)
    if number is None:
        raise ProgramRewardError(
            f'{source} holds {text.strip()[:200]!r}; a reward is a finite number or {{"reward": <number>}}.'
        )
    return number


def read_reward_file(path: Path) -> float | None:
    """The reward in the file at ``path``; None when the program wrote none.

    Raises:
        ProgramRewardError: the file holds something that is not a reward.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return parse_reward(text, source=f"The reward file {path}")


def reward_from_stdout(stdout_tail: str) -> float | None:
    """The reward of a last stdout line such as ``{"reward": 1.0}``; None when the last line is not one."""
    lines = [line for line in stdout_tail.splitlines() if line.strip()]
    if not lines:
        return None
    try:
        value = json.loads(lines[-1])
    except ValueError:
        return None
    if not isinstance(value, dict) or "reward" not in value:
        return None
    return parse_reward(lines[-1], source="The last line of the program's stdout")
