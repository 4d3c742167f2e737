"""The demo's outputs: a Markdown table, a bar chart with 95% intervals, before/after transcripts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evaluate import EvalResult
from tasks import Task

__all__ = ["format_table", "plot_accuracy", "write_transcripts"]


def _interval(pair: list[float] | None) -> str:
    return f"[{pair[0]:.1%}, {pair[1]:.1%}]" if pair else ""


def format_table(rows: list[dict[str, Any]]) -> str:
    """A Markdown table of the held-out rows (accuracy, intervals, gain over base, calculator use)."""
    lines = [
        "| held-out | accuracy (95% CI) | gain vs base (95% CI) | calculator use | tokens/episode |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        gain = f"{r['gain_vs_base']:+.1%} {_interval(r['gain_ci95'])}" if "gain_vs_base" in r else "-"
        lines.append(
            f"| {r['stage']} ({r['episodes']} problems) | {r['accuracy']:.1%} {_interval(r['ci95'])} | "
            f"{gain} | {r['calculator_use']:.0%} | {r['tokens_per_episode']:.1f} |"
        )
    return "\n".join(lines)


def plot_accuracy(rows: list[dict[str, Any]], path: Path) -> Path:
    """A bar chart of held-out accuracy per stage with 95% bootstrap error bars, saved as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["stage"] for r in rows]
    acc = [100 * r["accuracy"] for r in rows]
    low = [100 * (r["accuracy"] - r["ci95"][0]) for r in rows]
    high = [100 * (r["ci95"][1] - r["accuracy"]) for r in rows]
    fig, ax = plt.subplots(figsize=(5.5, 3.4), dpi=120)
    ax.bar(names, acc, yerr=[low, high], capsize=6, color=["#9aa5b1", "#5b8def", "#2bb673"][: len(rows)])
    for x, value in enumerate(acc):  # inside the bar, clear of the error bar's caps
        ax.text(x, value / 2, f"{value:.1f}%", ha="center", va="center", fontsize=10, color="white")
    ax.set_ylabel("held-out accuracy (%)")
    ax.set_ylim(0, 105)
    ax.set_title(
        f"SmolLM2-135M-Instruct, calculator agent ({rows[0]['episodes']} held-out problems)", fontsize=9
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def write_transcripts(evals: list[EvalResult], tasks: list[Task], path: Path, count: int = 4) -> Path:
    """Markdown transcripts of the first ``count`` held-out problems, every stage's replies side by side."""
    lines = ["# Held-out transcripts (greedy), first and last stage", ""]
    for k, task in enumerate(tasks[:count]):
        lines += [f"## {task['question']} (answer {task['answer']})", ""]
        for result in (evals[0], evals[-1]):
            o = result.outcomes[k]
            verdict = "right" if o.reward else "wrong"
            tool = f" -> calculator {o.answer}" if o.call is not None else " (no calculator call)"
            lines += [f"- **{result.stage}**: `{o.reply!r}`{tool}: {verdict}", ""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
