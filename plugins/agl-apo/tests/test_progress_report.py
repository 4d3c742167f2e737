"""The live view and the end-of-run report."""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agl_apo import APO
from agl_apo.progress import APOProgress
from agl_apo.report import change_summary, write_report
from agl_apo.state import APORunState, CandidateRecord, RoundRecord, candidate_resources_id


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=140, color_system=None), out


def _state() -> APORunState:
    seed = "Answer the question: {q}"
    child = seed + "\nThink step by step."
    return APORunState(
        run_id="r1",
        prompt_key="prompt_template",
        engine="f-string",
        seed_template=seed,
        rng_seed=1,
        candidates={
            "v0": CandidateRecord(
                version="v0",
                resources_id=candidate_resources_id("r1", "v0"),
                template=seed,
                full_val_score=0.25,
            ),
            "v1": CandidateRecord(
                version="v1",
                resources_id=candidate_resources_id("r1", "v1"),
                parent="v0",
                round=1,
                template=child,
                scores={1: 0.75},
                full_val_score=0.8,
            ),
        },
        beam=["v1", "v0"],
        best_version="v1",
        best_score=0.8,
        completed_rounds=1,
        seed_evaluated=True,
        rounds=[
            RoundRecord(round=0, leader="v0", leader_full_val_score=0.25, best="v0", best_score=0.25),
            RoundRecord(
                round=1,
                parents=["v0"],
                candidates=["v1"],
                scores={"v1": 0.75, "v0": 0.3},
                beam=["v1", "v0"],
                leader="v1",
                leader_full_val_score=0.8,
                best="v1",
                best_score=0.8,
            ),
        ],
    )


def test_live_view_shows_rounds_children_and_scores() -> None:
    console, out = _console()
    progress = APOProgress(run_id="r1", total_rounds=3, live=True, console=console)
    progress.start()
    assert progress.is_live
    state = _state()
    progress.end_round(state.rounds[0])
    progress.start_round(1, ["v0", "v0"])
    progress.child(0, "critique (failures)")
    progress.child(1, "candidate", version="v1")
    progress.rollouts(3, 5)
    progress.scored("v1", 0.75)
    progress.end_round(state.rounds[1])
    progress.phase("done: best v1 (0.800)")
    progress.stop()
    text = out.getvalue()
    assert "APO r1: round 1/3" in text
    assert "critique (failures)" in text and "0.750" in text and "rollouts 3/5" in text
    assert "v1 0.800" in text  # the rounds table's best-so-far column


def test_without_a_terminal_events_become_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    console, out = _console()
    progress = APOProgress(run_id="r1", total_rounds=3, live=False, console=console)
    with caplog.at_level(logging.INFO, logger="agl_core.algorithm.apo"):
        progress.start()
        progress.phase("round 1: 4 children")
        progress.end_round(_state().rounds[1])
        progress.stop()
    assert out.getvalue() == ""
    assert "APO r1: round 1: 4 children" in caplog.text
    assert "round 1 done: beam v1, v0; leader v1 full-val 0.800" in caplog.text


class _Trainer:
    def __init__(self, progress: bool) -> None:
        self.progress = progress


@pytest.mark.parametrize(
    ("setting", "trainer_progress", "expected"),
    [(None, True, False), (None, False, None), (True, True, True)],
)
def test_apo_leaves_the_terminal_to_a_trainer_that_shows_progress(
    setting: bool | None, trainer_progress: bool, expected: bool | None
) -> None:
    apo: APO[Any] = APO(base_url="http://127.0.0.1:1/v1", progress=setting)
    trainer = _Trainer(trainer_progress)
    apo.set_trainer(trainer)
    assert apo._live_view() is expected  # None: decided by whether stdout is a terminal


def test_change_summary_names_the_added_line() -> None:
    assert change_summary("A {x}\nB", "A {x}") == "+ B"
    assert change_summary("A {x}", None) == "(seed) A {x}"
    assert change_summary("A", "A\nB") == "(lines removed or reordered)"


def test_report_files_and_table(tmp_path: Path) -> None:
    console, out = _console()
    state = _state()
    report = write_report(state, tmp_path / "out", console=console, usage={"calls": 2})
    assert report.best_prompt.read_text(encoding="utf-8") == state.best.template + "\n"
    assert report.plot.read_bytes()[:4] == b"\x89PNG"
    text = out.getvalue()
    assert "final beam" in text and "★" in text and "+ Think step by step." in text
    assert "full-val 0.800, seed 0.250" in text
