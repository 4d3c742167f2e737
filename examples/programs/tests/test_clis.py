"""Real agent CLIs from the registries, driven unchanged as program agents: each gets both tasks, every
model call is recorded with exact token ids, the reward is attached, doctor says OK, and the prompt step
consumes the triplets and picks the prompt that makes the model use its tool."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

from conftest import require

HERE = Path(__file__).resolve().parents[1]


def load(example: str) -> ModuleType:
    """The example's train.py as a module of its own (every example has one)."""
    spec = importlib.util.spec_from_file_location(
        f"agl_program_example_{example}", HERE / example / "train.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(report: Any) -> None:
    from tasks import PROMPTS

    rollouts = report.rollouts
    assert len(rollouts) == 4 and {r.status for r in rollouts} == {"succeeded"}, [r.program for r in rollouts]
    by = {(r.kind, r.prompt): r for r in rollouts}
    assert {k: (r.llm_calls, r.with_token_ids) for k, r in by.items()} == {
        ("plain", PROMPTS[0]): (1, 1),
        ("plain", PROMPTS[1]): (1, 1),
        ("tool", PROMPTS[0]): (1, 1),
        ("tool", PROMPTS[1]): (2, 2),
    }
    assert report.model_requests == 5  # every request the model got is recorded
    assert {k: r.reward for k, r in by.items()} == {
        ("plain", PROMPTS[0]): 1.0,
        ("plain", PROMPTS[1]): 1.0,
        ("tool", PROMPTS[0]): 0.0,
        ("tool", PROMPTS[1]): 1.0,
    }
    assert all(r.doctor_ok for r in rollouts)
    assert report.best == PROMPTS[1]


def test_llm_cli() -> None:
    require(
        shutil.which("llm") is not None, "the llm CLI is not installed (pip install llm; make test-programs)"
    )
    from driver import train

    example = load("llm")
    check(train(example.llm_agent(), model=example.MODEL))


def test_mini_swe_agent() -> None:
    require(shutil.which("mini") is not None, "mini-swe-agent is not installed (make test-programs)")
    from driver import train

    example = load("mini_swe_agent")
    check(train(example.mini_agent(), model=example.MODEL))
