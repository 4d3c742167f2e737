"""The baseline_agent example runs end to end, offline, with both strategies."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "baseline_agent" / "train.py"


@pytest.mark.parametrize("strategy", ["shm", "cs"])
def test_example_trains_with_baseline_and_produces_triplets_with_token_ids(strategy: str) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--strategy", strategy, "--samples", "8", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["rollouts"] == 12 and summary["statuses"] == {"succeeded": 12}
    # first numbers 3..14: 6, 10 and 14 make the fake model guess instead of using the tool
    assert summary["mean_reward"] == pytest.approx(9 / 12)
    assert summary["triplets"] == 9 * 2 + 3  # two model calls with the tool, one without
    assert summary["triplets_with_token_ids"] == summary["triplets"]


def test_example_prints_a_human_summary() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--samples", "4"], cwd=REPO, capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("8 rollouts") and "with token ids" in last
