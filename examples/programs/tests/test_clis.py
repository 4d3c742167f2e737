"""Real agent CLIs from the registries, driven unchanged as program agents: each gets both tasks, every
model call is recorded with exact token ids, the reward is attached, doctor says OK, and the prompt step
consumes the triplets and picks the prompt that makes the model use its tool."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
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
    """Every rollout succeeds; every request the model got is recorded once, with exact token ids; the tool
    ran only under the prompt that asks for it; rewards as expected; doctor OK; the step picks that prompt."""
    from tasks import PROMPTS

    rollouts = report.rollouts
    assert len(rollouts) == 4 and {r.status for r in rollouts} == {"succeeded"}, [r.program for r in rollouts]
    assert sum(r.llm_calls for r in rollouts) == report.model_requests
    assert all(r.calls_made == r.llm_calls == r.with_token_ids == r.exact_token_ids >= 1 for r in rollouts)
    by = {(r.kind, r.prompt): r for r in rollouts}
    assert by[("tool", PROMPTS[1])].llm_calls >= 2  # a tool call, then the answer from its result
    assert {k: r.reward for k, r in by.items()} == {
        ("plain", PROMPTS[0]): 1.0,
        ("plain", PROMPTS[1]): 1.0,
        ("tool", PROMPTS[0]): 0.0,
        ("tool", PROMPTS[1]): 1.0,
    }
    assert all(r.doctor_ok for r in rollouts)
    assert report.best == PROMPTS[1]


@pytest.fixture(scope="module")
def npm_clis() -> Path:
    """Claude Code and the Codex CLI, pinned in examples/programs/clis, installed into .agl/npm once."""
    from driver import npm_clis

    from agl_testing.agent_clis import NpmMissingError

    require(
        importlib.util.find_spec("agl_proxy_translate") is not None,
        "the agl-proxy-translate plugin is not installed (make test-programs installs it)",
    )
    try:
        return npm_clis()
    except NpmMissingError as exc:
        require(False, f"the npm CLIs cannot be installed: {exc}")
        raise


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


def test_claude_code(npm_clis: Path) -> None:
    from driver import train

    check(train(load("claude_code").claude_agent(npm_clis), model="*"))


def test_codex_cli(npm_clis: Path) -> None:
    from driver import train

    check(train(load("codex").codex_agent(npm_clis), model="*"))
