"""The shortened demo (``run.py --quick``) runs the whole loop: rollouts, proxy token ids, both training
stages, metrics, the reward curve and the held-out evaluation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agl_core.adapter import LlmProxyTraceToTriplet
from agl_core.store import open_store

DEMO = Path(__file__).resolve().parents[1]
REPO = DEMO.parents[1]


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


async def test_quick_demo_runs_the_whole_loop(tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        str(DEMO / "run.py"),
        "--quick",
        "--out",
        str(out),
        "--models",
        str(REPO / ".agl/models"),
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "agl store serve --store sqlite:///" in proc.stdout and "agl doctor " in proc.stdout

    # Training steps happened in both stages and every rollout succeeded.
    sft = _rows(out / "sft" / "metrics.jsonl")
    rl = _rows(out / "rl" / "metrics.jsonl")
    assert [r["iteration"] for r in sft] == [1] and sft[0]["kept"] > 0 and sft[0]["failed"] == 0
    assert [r["step"] for r in rl] == [1, 2]
    assert all(r["failed"] == 0 and r["rollouts"] == 8 for r in rl)
    assert all(r["llm_calls"] == 2 * r["rollouts"] for r in rl)  # two turns per episode, both recorded
    manifest = json.loads((out / "sft" / "manifest.json").read_text())
    assert (Path(manifest["final_model"]) / "config.json").is_file()
    assert (Path(manifest["iterations"][0]["adapter_dir"]) / "adapter_config.json").is_file()

    # One store holds both stages; the proxy recorded prompt and response token ids.
    store = open_store(f"sqlite:///{out / 'store.db'}")
    try:
        rollouts = list(await store.query_rollouts())
        assert len(rollouts) == sft[0]["rollouts"] + sum(r["rollouts"] for r in rl)
        assert all(r.status == "succeeded" for r in rollouts)
        spans = list(await store.query_spans(rollouts[-1].rollout_id, "latest"))
        triplets = LlmProxyTraceToTriplet().adapt(spans)
        assert len(triplets) == 2
        assert all(t.prompt["token_ids"] and t.response["token_ids"] for t in triplets)
    finally:
        await store.close()

    # Held-out reward measured for the three models; the curve is a PNG.
    heldout = _rows(out / "heldout.jsonl")
    assert [r["stage"] for r in heldout] == ["base", "after SFT", "after RL"]
    assert all(0.0 <= r["reward"] <= 1.0 and r["episodes"] == 12 and r["tokens"] > 0 for r in heldout)
    assert (out / "reward_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
