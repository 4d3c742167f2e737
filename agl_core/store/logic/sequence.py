"""Planning of span sequence ids for a batch of (rollout, attempt) pairs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


__all__ = [
    "plan_sequence_ids",
]


def plan_sequence_ids(
    rollout_ids: Sequence[str], current: Callable[[str], int]
) -> tuple[list[int], dict[str, int]]:
    """Issue one sequence id per entry of `rollout_ids` (per-rollout counters, no gaps).

    `current(rollout_id)` returns the last id issued for that rollout (0 if none). Returns the ids in
    input order and the new counter value of each rollout involved, to persist atomically.
    """
    counters: dict[str, int] = {}
    issued: list[int] = []
    for rollout_id in rollout_ids:
        value = counters.get(rollout_id)
        if value is None:
            value = current(rollout_id)
        value += 1
        counters[rollout_id] = value
        issued.append(value)
    return issued, counters
