"""Per-step progress (rich live table on a TTY, log lines otherwise) and the run folder's metrics files.

Built on the core's shared helpers in :mod:`agl_core.reporting`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agl_core.reporting import ProgressTable, RewardCurve, plot_reward_curves, read_jsonl

__all__ = ["MetricsLog", "ProgressView", "plot_rewards"]

logger = logging.getLogger("agl_core.algorithm.tinker")

_COLUMNS = (
    ("step", "step", "{}"),
    ("reward_mean", "reward", "{:.3f}"),
    ("reward_std", "std", "{:.3f}"),
    ("tokens", "tokens", "{}"),
    ("loss", "loss", "{:.4f}"),
    ("step_time_s", "time (s)", "{:.2f}"),
)


class ProgressView(ProgressTable):
    """One row per training step (the last 20 on screen); ``enabled=None``: a live table only on a TTY."""

    def __init__(self, total_steps: int, enabled: bool | None = None) -> None:
        super().__init__(
            total_steps,
            _COLUMNS,
            title="agl-tinker: {done}/{total} steps",
            live=enabled,
            refresh_per_second=4,
            max_rows=20,
        )
        self.total_steps = total_steps

    @property
    def live_view(self) -> bool:
        """Whether the live table is drawn (otherwise each step is a log line)."""
        return self.live

    def log_row(self, row: dict[str, Any]) -> None:
        """One INFO line per step when there is no live table."""
        if not self.live:
            logger.info("tinker step %s/%s: %s", row.get("step"), self.total_steps, self.cells(row, skip=1))


class MetricsLog:
    """Sends each step's metrics to ``<run_dir>/metrics.jsonl`` and to the trackers named in `reporters`.

    `reporters` (or ``$AGL_REPORTERS``) may add ``tensorboard``, ``mlflow`` and ``wandb``; the JSONL file
    is always written (the reward plot reads it). See `agl_core.reporting`.
    """

    def __init__(
        self, run_dir: Path, reporters: Sequence[str] | None = None, config: Mapping[str, Any] | None = None
    ) -> None:
        from agl_core.reporting import open_reporters, reporter_names

        self.path = run_dir / "metrics.jsonl"
        self._reporters = open_reporters(
            ["jsonl", *reporter_names(reporters)], run_dir=run_dir, config=config
        )

    def append(self, metrics: dict[str, Any]) -> None:
        """Report one step's metrics (the JSONL line is flushed at once)."""
        self._reporters.log(int(metrics.get("step", 0)), metrics)

    def close(self) -> None:
        """Close the trackers (flushes their files)."""
        self._reporters.close()

    def read(self) -> list[dict[str, Any]]:
        """Every step logged so far (resumed runs included)."""
        return read_jsonl(self.path)


def plot_rewards(rows: list[dict[str, Any]], path: Path) -> Path | None:
    """Save the reward curve (mean with a ±std band) as a PNG; None when there is nothing to plot."""
    points = [r for r in rows if r.get("reward_mean") is not None]
    curve = RewardCurve(
        "reward mean",
        [r["step"] for r in points],
        [r["reward_mean"] for r in points],
        spread=[r.get("reward_std") or 0.0 for r in points],
    )
    return plot_reward_curves(path, [curve], xlabel="step", title="agl-tinker reward")
