"""Choosing the rollouts to learn from and turning their traces into chat conversations for SFT."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["NoRolloutsKeptError", "ScoredRollout", "conversations", "select_best"]


class NoRolloutsKeptError(RuntimeError):
    """No rollout of an iteration passed the selection, so there is nothing to fine-tune on."""


@dataclass
class ScoredRollout:
    """A finished rollout: its id, final reward (None when it reported none) and traced conversations."""

    rollout_id: str
    reward: float | None
    status: str
    samples: list[Any] = field(default_factory=list)  # TraceToMessages samples: {"messages", "tools"}


def select_best(
    rollouts: Sequence[ScoredRollout],
    *,
    top_k: int | None = None,
    keep_fraction: float = 0.25,
    reward_threshold: float | None = None,
) -> list[ScoredRollout]:
    """The best succeeded rollouts with a reward and conversations, best first.

    Rollouts below ``reward_threshold`` are dropped; of the rest the ``top_k`` best are kept (or, without
    ``top_k``, the best ``ceil(keep_fraction * n)`` of the ``n`` candidates). Ties keep enqueue order.
    """
    candidates = [r for r in rollouts if r.status == "succeeded" and r.reward is not None and r.samples]
    if reward_threshold is not None:
        candidates = [r for r in candidates if (r.reward or 0.0) >= reward_threshold]
    ranked = sorted(candidates, key=lambda r: -(r.reward or 0.0))
    limit = top_k if top_k is not None else math.ceil(keep_fraction * len(ranked))
    return ranked[:limit]


def _clean(message: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content") or ""}
    if not isinstance(out["content"], str):  # content parts -> text
        out["content"] = "".join(p.get("text", "") for p in out["content"] if isinstance(p, dict))
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    return out


def conversations(kept: Sequence[ScoredRollout]) -> list[dict[str, Any]]:
    """SFT rows ``{"messages": [...]}`` from the kept rollouts' traced LLM calls (one row per call)."""
    rows = []
    for rollout in kept:
        for sample in rollout.samples:
            rows.append({"messages": [_clean(m) for m in sample["messages"]]})
    return rows
