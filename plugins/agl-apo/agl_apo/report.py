"""The end-of-run report: the beam as a table, the best prompt in a file, a score-per-round plot."""

from __future__ import annotations

import difflib
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from agl_apo.state import APORunState

__all__ = ["APOReport", "beam_table", "change_summary", "plot_scores", "write_report"]

BEST_PROMPT_FILE = "best_prompt.txt"
PLOT_FILE = "scores.png"
STATE_FILE = "run_state.json"


@dataclass(frozen=True)
class APOReport:
    """Where the report files of a run were written."""

    run_dir: Path
    best_prompt: Path
    plot: Path | None
    """The score plot; None when matplotlib is not installed (``pip install 'agl-apo[plots]'``)."""
    state: Path


def _fmt(score: float | None) -> str:
    return "-" if score is None else f"{score:.3f}"


def _clip(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def change_summary(template: str, parent: str | None, width: int = 70) -> str:
    """The first line ``template`` adds to its parent (``+ ...``), or its first line for the seed."""
    if parent is None:
        return "(seed) " + _clip(next((p.strip() for p in template.splitlines() if p.strip()), ""), width)
    for line in difflib.ndiff(parent.splitlines(), template.splitlines()):
        if line.startswith("+ ") and line[2:].strip():
            return "+ " + _clip(line[2:].strip(), width)
    return "(lines removed or reordered)"


def beam_table(state: APORunState) -> Table:
    """The final beam (best first) with lineage and scores, plus the best prompt if it left the beam."""
    from rich.table import Table

    table = Table(title=f"APO {state.run_id}: final beam", title_justify="left")
    for column in ("", "version", "parent", "round", "batch score", "full val", "change vs parent"):
        table.add_column(column)
    versions = list(state.beam)
    if state.best_version not in versions:
        versions.append(state.best_version)
    for version in versions:
        record = state.candidate(version)
        marker = "★" if version == state.best_version else ""
        table.add_row(
            marker,
            version,
            record.parent or "-",
            str(record.round),
            _fmt(record.score),
            _fmt(record.full_val_score),
            change_summary(
                record.template, state.candidates[record.parent].template if record.parent else None
            ),
        )
    return table


def plot_scores(state: APORunState, path: Path) -> Path:
    """Save a PNG of scores per round: best-so-far and leader (full validation set), beam batch scores."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    rounds = [r.round for r in state.rounds]
    figure, axes = plt.subplots(figsize=(7, 4), dpi=120)
    try:
        best = [(r.round, r.best_score) for r in state.rounds if r.best_score is not None]
        if best:
            axes.plot(*zip(*best, strict=True), marker="o", linewidth=2, label="best so far (full val)")
        leader = [
            (r.round, r.leader_full_val_score) for r in state.rounds if r.leader_full_val_score is not None
        ]
        if leader:
            axes.plot(*zip(*leader, strict=True), marker="s", linestyle="--", label="round leader (full val)")
        for record in state.rounds:
            if record.scores:
                xs = [record.round] * len(record.scores)
                axes.scatter(xs, list(record.scores.values()), s=14, alpha=0.5, color="gray")
        if any(r.scores for r in state.rounds):
            axes.scatter([], [], s=14, alpha=0.5, color="gray", label="candidates (val batch)")
        axes.set_xlabel("round (0 = seed prompt)")
        axes.set_ylabel("mean reward")
        axes.set_title(f"APO {state.run_id}")
        if rounds:
            axes.set_xticks(sorted(set(rounds)))
        axes.grid(True, alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(loc="lower right")
        figure.tight_layout()
        figure.savefig(path)
    finally:
        plt.close(figure)
    return path


def write_report(
    state: APORunState, run_dir: Path, *, console: Console | None = None, usage: Any = None
) -> APOReport:
    """Write ``best_prompt.txt``, ``scores.png`` (``plots`` extra) and ``run_state.json``; print the beam."""
    run_dir.mkdir(parents=True, exist_ok=True)
    best_path = run_dir / BEST_PROMPT_FILE
    best_path.write_text(state.best.template + "\n", encoding="utf-8")
    has_matplotlib = importlib.util.find_spec("matplotlib") is not None
    plot_path = plot_scores(state, run_dir / PLOT_FILE) if has_matplotlib else None
    state_path = run_dir / STATE_FILE
    payload = json.loads(state.model_dump_json())
    if usage is not None:
        payload["optimizer_usage"] = usage
    state_path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    if console is not None:
        console.print(beam_table(state))
        seed = state.candidates.get("v0")
        console.print(
            f"Best prompt {state.best_version} (full-val {_fmt(state.best_score)}, seed "
            f"{_fmt(seed.full_val_score if seed else None)}) written to {best_path}"
        )
        plot_note = plot_path or "not drawn (pip install 'agl-apo[plots]' for it)"
        console.print(f"Score plot: {plot_note}   run state: {state_path}")
    return APOReport(run_dir=run_dir, best_prompt=best_path, plot=plot_path, state=state_path)
