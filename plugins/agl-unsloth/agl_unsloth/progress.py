"""Per-iteration progress lines (or a rich table on a TTY), metrics JSONL and the reward PNG."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

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


def _cell(row: dict[str, Any], key: str, fmt: str) -> str:
    value = row.get(key)
    return "-" if value is None else fmt.format(value)


class IterationView:
    """One row per iteration: a rich live table when ``live`` (default: on a TTY), log lines otherwise."""

    def __init__(self, total: int, live: bool | None = None) -> None:
        self.total = total
        self.live = sys.stderr.isatty() if live is None else live
        self.rows: list[dict[str, Any]] = []
        self._live: Any = None

    def __enter__(self) -> IterationView:
        if self.live:
            from rich.live import Live

            self._live = Live(self._table(), refresh_per_second=2)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(title=f"agl-unsloth SFT: {len(self.rows)}/{self.total} iterations")
        for _, title, _ in _COLUMNS:
            table.add_column(title, justify="right")
        for row in self.rows:
            table.add_row(*(_cell(row, key, fmt) for key, _, fmt in _COLUMNS))
        return table

    def update(self, row: dict[str, Any]) -> None:
        """Show one finished iteration (with its loss curve in the log line)."""
        self.rows.append(row)
        if self._live is not None:
            self._live.update(self._table())
        cells = " ".join(f"{title}={_cell(row, key, fmt)}" for key, title, fmt in _COLUMNS)
        curve = ",".join(f"{x:.3f}" for x in row.get("losses") or [])
        logger.info("sft %s/%s: %s losses=[%s]", row.get("iteration"), self.total, cells, curve)


def append_metrics(path: Path, row: dict[str, Any]) -> None:
    """Append one iteration's metrics to the JSONL file ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Every row of a metrics JSONL file ([] when it does not exist)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def plot_rewards(rows: list[dict[str, Any]], path: Path) -> Path | None:
    """Save mean (and kept-mean) reward per iteration as a PNG; None when no row has a reward."""
    points = [r for r in rows if r.get("reward_mean") is not None]
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    xs = [r["iteration"] for r in points]
    ax.plot(xs, [r["reward_mean"] for r in points], marker="o", label="all rollouts")
    kept = [r for r in points if r.get("kept_reward_mean") is not None]
    ax.plot(
        [r["iteration"] for r in kept],
        [float(r["kept_reward_mean"]) for r in kept],
        marker="x",
        linestyle="--",
        label="kept",
    )
    ax.set_xlabel("iteration (model served)")
    ax.set_ylabel("reward")
    ax.set_title("agl-unsloth SFT reward")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
