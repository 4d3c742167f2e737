"""Per-step progress (rich live table on a TTY, log lines otherwise) and the run folder's metrics files."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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


def _cell(metrics: dict[str, Any], key: str, fmt: str) -> str:
    value = metrics.get(key)
    return "-" if value is None else fmt.format(value)


class ProgressView:
    """Shows one row per training step; ``enabled=None`` picks the live view only on a TTY."""

    def __init__(self, total_steps: int, enabled: bool | None = None) -> None:
        self.total_steps = total_steps
        self.live_view = sys.stderr.isatty() if enabled is None else enabled
        self._rows: list[dict[str, Any]] = []
        self._live: Any = None

    def __enter__(self) -> ProgressView:
        if self.live_view:
            from rich.live import Live

            self._live = Live(self._table(), refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(title=f"agl-tinker: {len(self._rows)}/{self.total_steps} steps")
        for _, title, _ in _COLUMNS:
            table.add_column(title, justify="right")
        for row in self._rows[-20:]:
            table.add_row(*(_cell(row, key, fmt) for key, _, fmt in _COLUMNS))
        return table

    def update(self, metrics: dict[str, Any]) -> None:
        """Show the metrics of one finished step."""
        self._rows.append(metrics)
        if self._live is not None:
            self._live.update(self._table())
        else:
            logger.info(
                "tinker step %s/%s: %s",
                metrics.get("step"),
                self.total_steps,
                " ".join(f"{title}={_cell(metrics, key, fmt)}" for key, title, fmt in _COLUMNS[1:]),
            )


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
        if not self.path.is_file():
            return []
        return [
            json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()
        ]


def plot_rewards(rows: list[dict[str, Any]], path: Path) -> Path | None:
    """Save the reward curve (mean with a ±std band) as a PNG; None when there is nothing to plot."""
    points = [
        (r["step"], r["reward_mean"], r.get("reward_std") or 0.0)
        for r in rows
        if r.get("reward_mean") is not None
    ]
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, means, stds = zip(*points, strict=True)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps, means, marker="o", label="reward mean")
    ax.fill_between(
        steps,
        [m - s for m, s in zip(means, stds, strict=True)],
        [m + s for m, s in zip(means, stds, strict=True)],
        alpha=0.2,
    )
    ax.set_xlabel("step")
    ax.set_ylabel("reward")
    ax.set_title("agl-tinker reward")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
