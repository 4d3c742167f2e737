"""``examples/apo``: the checker, the cost estimate, and an offline run through the Trainer (and resume)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

EXAMPLE_DIR = Path(__file__).resolve().parents[3] / "examples" / "apo"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"apo_example_{name}", EXAMPLE_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _train(cwd: Path, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE_DIR / "train.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_checker_scores_right_suitable_and_wrong_rooms() -> None:
    booking = _load("room_booking")
    task = booking.make_tasks(1, seed=5)[0]
    right = task["expected"]
    assert booking.score_answer(f"I would book {right}.", task) == 1.0
    assert booking.score_answer(f"Options: Foo or bar.\nFinal answer: {right}", task) == 1.0
    others = [r for r in task["rooms"] if r["name"] != right]
    larger = [r for r in others if booking._fits(r, task)]
    unsuitable = [r for r in others if not booking._fits(r, task)]
    if larger:
        assert booking.score_answer(larger[0]["name"], task) == 0.5
    assert unsuitable and booking.score_answer(unsuitable[0]["name"], task) == 0.0
    assert booking.score_answer("no idea", task) == 0.0


def test_tasks_are_reproducible_and_have_one_best_room() -> None:
    booking = _load("room_booking")
    tasks = booking.make_tasks(20, seed=1)
    assert tasks == booking.make_tasks(20, seed=1)
    for task in tasks:
        assert booking.best_room(task) == task["expected"]
        assert task["expected"] in {room["name"] for room in task["rooms"]}


def test_cost_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    cost = _load("train").main(["--offline", "--estimate", "--rounds", "3", "--val-size", "16"])
    assert json.loads(capsys.readouterr().out) == cost
    children = 2 * 2
    per_round = children * 4 + (2 + children) * 8 + 16
    assert cost["task_calls"] == 16 + 3 * per_round
    assert cost["optimizer_calls"] == 3 * children * 2


@pytest.mark.slow
def test_offline_run_improves_the_prompt_and_resumes(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    common = [
        "--offline",
        "--json",
        "--store",
        store,
        "--run-id",
        "rooms",
        "--output-dir",
        str(tmp_path / "out"),
    ]
    summary = _train(tmp_path, *common, "--rounds", "2")
    assert summary["rounds"] == 2
    assert summary["best_score"] > summary["seed_score"]
    best = Path(summary["best_prompt_file"]).read_text(encoding="utf-8")
    assert "{request}" in best and "{rooms}" in best
    assert Path(summary["plot_file"]).read_bytes()[:4] == b"\x89PNG"
    more = _train(tmp_path, *common, "--rounds", "3", "--resume")  # one more round on the same run
    assert more["rounds"] == 3 and more["run_id"] == "rooms"
    assert more["best_score"] >= summary["best_score"]
    state = json.loads((tmp_path / "out" / "run_state.json").read_text(encoding="utf-8"))
    assert [r["round"] for r in state["rounds"]] == [0, 1, 2, 3]
