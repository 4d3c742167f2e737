"""The demo's outputs: the before/after table and the reward curve with the training stages marked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["format_table", "plot_curve", "read_jsonl"]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSONL file (empty when it does not exist)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def format_table(rows: list[dict[str, Any]]) -> str:
    """A plain-text table of held-out results (stage, reward, success rate, tokens per episode)."""
    lines = [f"{'stage':<12}{'reward':>10}{'success':>10}{'tokens':>10}{'episodes':>10}"]
    for r in rows:
        reward, success, tokens = r["reward"], r["success_rate"], r["tokens"]
        lines.append(f"{r['stage']:<12}{reward:>10.3f}{success:>10.0%}{tokens:>10.1f}{r['episodes']:>10}")
    return "\n".join(lines)


def plot_curve(
    sft_rows: list[dict[str, Any]], rl_rows: list[dict[str, Any]], evals: list[dict[str, Any]], path: Path
) -> Path:
    """Training reward per round (SFT iterations, then RL steps) with the held-out rewards as markers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sft = [r["reward_mean"] for r in sft_rows if r.get("kept") is not None]
    rl = [r["reward_mean"] for r in rl_rows]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    xs_sft = list(range(1, len(sft) + 1))
    xs_rl = list(range(len(sft) + 1, len(sft) + len(rl) + 1))
    ax.axvspan(0.5, len(sft) + 0.5, color="tab:blue", alpha=0.08, label="SFT warm-up (agl-unsloth)")
    ax.axvspan(
        len(sft) + 0.5, len(sft) + len(rl) + 0.5, color="tab:orange", alpha=0.08, label="RL (agl-tinker)"
    )
    ax.plot(xs_sft, sft, "o-", color="tab:blue", label="train reward (SFT rollouts)")
    ax.plot(xs_rl, rl, "o-", color="tab:orange", label="train reward (RL step)")
    by_stage = {e["stage"]: e["reward"] for e in evals}
    marks = [("base", 0.5), ("after SFT", len(sft) + 0.5), ("after RL", len(sft) + len(rl) + 0.5)]
    for stage, x in marks:
        if stage in by_stage:
            ax.plot([x], [by_stage[stage]], "k*", markersize=12)
            ax.annotate(
                f"{stage}: {by_stage[stage]:.2f}",
                (x, by_stage[stage]),
                textcoords="offset points",
                xytext=(4, 6),
                fontsize=8,
            )
    ax.set_xlabel("training round (SFT iteration, then RL step)")
    ax.set_ylabel("reward (share of digits in the final answer)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("agl CPU demo: held-out reward (stars) and training reward")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
