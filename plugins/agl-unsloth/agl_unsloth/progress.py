"""Per-iteration progress lines (or a rich table on a TTY), metrics JSONL and the reward PNG.

Built on the core's shared helpers in :mod:`agl_core.reporting`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from agl_core.reporting import ProgressTable, RewardCurve, append_jsonl, plot_reward_curves, read_jsonl

__all__ = ["IterationView", "append_metrics", "plot_rewards", "read_metrics"]

logger = logging.getLogger("agl_core.algorithm.unsloth")

_COLUMNS = (
    ("iteration", "iter", "{}"),
    ("reward_mean", "reward", "{:.3f}"),
    ("rollouts", "rollouts", "{}"),
    ("kept", "kept", "{}"),
    ("loss_first", "loss first", "{:.4f}"),
    ("loss_last", "loss last", "{:.4f}"),
    ("iteration_time_s", "time (s)", "{:.1f}"),
)


class IterationView(ProgressTable):
    """One row per iteration: a rich live table when ``live`` (default: on a TTY), and a log line each."""

    def __init__(self, total: int, live: bool | None = None) -> None:
        super().__init__(
            total,
            _COLUMNS,
            title="agl-unsloth SFT: {done}/{total} iterations",
            live=live,
            refresh_per_second=2,
        )

    def log_row(self, row: dict[str, Any]) -> None:
        """One INFO line per iteration, with its loss curve."""
        curve = ",".join(f"{x:.3f}" for x in row.get("losses") or [])
        logger.info("sft %s/%s: %s losses=[%s]", row.get("iteration"), self.total, self.cells(row), curve)


def append_metrics(path: Path, row: dict[str, Any]) -> None:
    """Append one iteration's metrics to the JSONL file ``path``."""
    append_jsonl(path, row)


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Every row of a metrics JSONL file ([] when it does not exist)."""
    return read_jsonl(path)


def plot_rewards(rows: list[dict[str, Any]], path: Path) -> Path | None:
    """Save mean (and kept-mean) reward per iteration as a PNG; None when no row has a reward."""
    points = [r for r in rows if r.get("reward_mean") is not None]
    kept = [r for r in points if r.get("kept_reward_mean") is not None]
    curves = [
        RewardCurve("all rollouts", [r["iteration"] for r in points], [r["reward_mean"] for r in points]),
        RewardCurve(
            "kept",
            [r["iteration"] for r in kept],
            [float(r["kept_reward_mean"]) for r in kept],
            marker="x",
            linestyle="--",
        ),
    ]
    return plot_reward_curves(
        path, curves, xlabel="iteration (model served)", title="agl-unsloth SFT reward", legend=True
    )
