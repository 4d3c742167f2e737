"""The reward curve of a training run as a PNG (matplotlib, imported only when a plot is drawn)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RewardCurve", "plot_reward_curves"]


@dataclass(frozen=True)
class RewardCurve:
    """One line of a reward plot: x values, mean rewards, and optionally a ±``spread`` band."""

    label: str
    xs: Sequence[float]
    ys: Sequence[float]
    spread: Sequence[float] | None = None
    marker: str = "o"
    linestyle: str = "-"


def plot_reward_curves(
    path: Path, curves: Sequence[RewardCurve], *, xlabel: str, title: str, legend: bool = False
) -> Path | None:
    """Save ``curves`` as a PNG at ``path``; None (and no file) when the first curve has no point."""
    if not curves or not curves[0].xs:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for curve in curves:
        ax.plot(curve.xs, curve.ys, marker=curve.marker, linestyle=curve.linestyle, label=curve.label)
        if curve.spread is not None:
            ax.fill_between(
                curve.xs,
                [y - s for y, s in zip(curve.ys, curve.spread, strict=True)],
                [y + s for y, s in zip(curve.ys, curve.spread, strict=True)],
                alpha=0.2,
            )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("reward")
    ax.set_title(title)
    if legend:
        ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
