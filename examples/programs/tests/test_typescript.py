"""The TypeScript agent, trained unchanged: both tasks succeed, every model call is recorded with exact token
ids, the reward it printed is attached, doctor says OK, and the prompt step picks the prompt that works."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1] / "typescript"
sys.path.insert(0, str(HERE))


@pytest.fixture(autouse=True)
def built() -> None:
    from conftest import require

    require(
        (HERE / "dist" / "agent.js").is_file() and shutil.which("node") is not None,
        "the TypeScript agent is not built: make test-programs (npm ci && npm run build in its folder)",
    )


@pytest.mark.parametrize("strategy", ["shm", "cs"])
def test_the_typescript_agent_trains_unchanged(strategy: str) -> None:
    from driver import train
    from tasks import PROMPTS
    from train import typescript_agent

    report = train(typescript_agent(), strategy=strategy)

    assert len(report.rollouts) == 4 and {r.status for r in report.rollouts} == {"succeeded"}
    calls = {(r.kind, r.prompt): r for r in report.rollouts}
    # one proxy record per model call, each with token ids; the tool task makes 2 calls with the tool prompt
    assert {key: (r.llm_calls, r.with_token_ids, r.exact_token_ids) for key, r in calls.items()} == {
        ("plain", PROMPTS[0]): (1, 1, 1),
        ("plain", PROMPTS[1]): (1, 1, 1),
        ("tool", PROMPTS[0]): (1, 1, 1),
        ("tool", PROMPTS[1]): (2, 2, 2),
    }
    assert report.model_requests == 5
    assert {key: r.reward for key, r in calls.items()} == {
        ("plain", PROMPTS[0]): 1.0,
        ("plain", PROMPTS[1]): 1.0,
        ("tool", PROMPTS[0]): 0.0,
        ("tool", PROMPTS[1]): 1.0,
    }
    assert all(r.doctor_ok for r in report.rollouts)
    assert all(r.program["agl.program.exit_code"] == 0 for r in report.rollouts)
    assert report.scores[PROMPTS[1]] > report.scores[PROMPTS[0]] and report.best == PROMPTS[1]
