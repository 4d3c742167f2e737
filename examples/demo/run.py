"""agl's CPU training demo: an optimization ladder (SFT warm-up, then RL) on one SQLite store, end to end.

    python examples/demo/run.py [--quick]

A tiny model is built locally (cached under ``.agl/models/``). A two-turn, tool-using agent written with
the ``openai`` client learns to answer with digits only. Both stages run through the real loop: the
SQLite store served over HTTP by the trainer (client-server strategy), runners in separate processes, the
LLM proxy recording token ids, the tracer and the adapters. Stage 1 is agl-unsloth's ``SFT`` (CPU TRL
engine); stage 2 is agl-tinker's ``Tinker(backend="local")`` starting from the SFT-merged weights. The
held-out tasks are evaluated before, between and after the stages.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
# Keep the console to the demo's own lines and the plugins' progress (no per-load progress bars).
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TQDM_DISABLE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent import demo_agent
from evaluate import EvalResult, evaluate_folder, evaluate_sampler
from report import format_table, plot_curve, read_jsonl
from tasks import make_tasks

from agl_core.store import open_store
from agl_core.trainer import Trainer

#: Settings of the full demo and of ``--quick`` (the CI smoke run).
SETTINGS: dict[str, dict[str, int]] = {
    "full": {
        "n_train": 12,
        "n_heldout": 16,
        "eval_samples": 4,
        "sft_iterations": 2,
        "sft_rollouts": 4,
        "sft_top_k": 12,
        "sft_epochs": 5,
        "rl_steps": 12,
        "rl_batch": 4,
        "rl_group": 8,
    },
    "quick": {
        "n_train": 6,
        "n_heldout": 6,
        "eval_samples": 2,
        "sft_iterations": 1,
        "sft_rollouts": 2,
        "sft_top_k": 6,
        "sft_epochs": 2,
        "rl_steps": 2,
        "rl_batch": 2,
        "rl_group": 4,
    },
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a shortened run (fewer tasks and steps)")
    parser.add_argument("--out", type=Path, default=Path(".agl/demo-train"), help="run folder (recreated)")
    parser.add_argument("--models", type=Path, default=Path(".agl/models"), help="model cache folder")
    parser.add_argument("--runners", type=int, default=2, help="runner processes")
    return parser.parse_args(argv)


def base_model(models: Path) -> Path:
    """The tiny base model (ChatML tokenizer + Qwen2 weights), built once and cached."""
    from agl_unsloth.testing import build_tiny_model

    folder = models / "tiny-qwen2-chatml"
    if not (folder / "config.json").is_file():
        print(f"building the tiny base model in {folder} (no download) ...", flush=True)
        build_tiny_model(folder)
    return folder


def trainer(store_uri: str, algorithm: Any, runners: int) -> Trainer:
    """A client-server trainer: store served over HTTP in this process, runners in child processes."""
    return Trainer(
        n_runners=runners, strategy="cs", port=0, store=store_uri, algorithm=algorithm, progress=False
    )


def stage_sft(
    cfg: dict[str, int], model: Path, out: Path, store_uri: str, runners: int, train: list[Any]
) -> Path:
    """Stage 1: iterated SFT on the agent's best rollouts; returns the merged model folder."""
    from agl_unsloth import SFT

    algo = SFT(
        model_name=model,
        engine="trl",
        serving="transformers",
        n_iterations=cfg["sft_iterations"],
        rollouts_per_task=cfg["sft_rollouts"],
        top_k=cfg["sft_top_k"],
        learning_rate=5e-3,
        epochs=cfg["sft_epochs"],
        lora_rank=8,
        max_tokens=6,
        evaluate_final=False,
        run_dir=out / "sft",
        rollout_timeout=300,
        progress=None,
    )
    trainer(store_uri, algo, runners).fit(demo_agent, train)
    return Path(algo.current_model)


def stage_rl(
    cfg: dict[str, int], model: Path, out: Path, store_uri: str, runners: int, train: list[Any]
) -> Any:
    """Stage 2: on-policy RL with agl-tinker's local backend from ``model``; returns the algorithm."""
    from agl_tinker import Tinker

    algo = Tinker(
        model_name=str(model),
        backend="local",
        lora_rank=0,
        learning_rate=3e-3,
        group_size=cfg["rl_group"],
        batch_size=cfg["rl_batch"],
        n_steps=cfg["rl_steps"],
        max_tokens=6,
        save_every=cfg["rl_steps"],
        run_dir=out / "rl",
        rollout_timeout=300,
        progress=None,
    )
    trainer(store_uri, algo, runners).fit(demo_agent, train)
    return algo


async def first_rollout_id(store_uri: str) -> str | None:
    """A succeeded rollout of the run, for the ``agl doctor`` pointer."""
    store = open_store(store_uri)
    try:
        rollouts = await store.query_rollouts(status_in=["succeeded"])
        return rollouts[-1].rollout_id if len(rollouts) else None
    finally:
        await store.close()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the demo; returns the summary that is also written to ``<out>/summary.json``."""
    args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(name)s %(message)s", datefmt="%H:%M:%S")
    for name in ("agl_core.algorithm.unsloth", "agl_core.algorithm.tinker"):  # per-iteration / per-step lines
        logging.getLogger(name).setLevel(logging.INFO)
    cfg = SETTINGS["quick" if args.quick else "full"]
    t_start = time.perf_counter()
    out = args.out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    store_uri = f"sqlite:///{out / 'store.db'}"
    train, heldout = make_tasks(cfg["n_train"], cfg["n_heldout"])
    model = base_model(args.models)
    evals: list[EvalResult] = []
    timings: dict[str, float] = {}

    def evaluate(stage: str, folder: Path) -> None:
        t = time.perf_counter()
        evals.append(
            asyncio.run(evaluate_folder(stage, folder, heldout, cfg["eval_samples"], out / "scratch"))
        )
        timings[f"eval {stage}"] = round(time.perf_counter() - t, 1)
        print(f"held-out [{stage}]: {json.dumps(evals[-1].row())}", flush=True)

    evaluate("base", model)
    print(f"\n== stage 1: SFT warm-up (agl-unsloth, {cfg['sft_iterations']} iteration(s)) ==", flush=True)
    t = time.perf_counter()
    sft_model = stage_sft(cfg, model, out, store_uri, args.runners, train)
    timings["sft"] = round(time.perf_counter() - t, 1)
    evaluate("after SFT", sft_model)
    print(f"\n== stage 2: RL (agl-tinker local, {cfg['rl_steps']} steps, from {sft_model}) ==", flush=True)
    t = time.perf_counter()
    rl = stage_rl(cfg, sft_model, out, store_uri, args.runners, train)
    timings["rl"] = round(time.perf_counter() - t, 1)

    async def eval_rl() -> EvalResult:
        sampler = await rl.training_client.save_weights_and_get_sampling_client()
        return await evaluate_sampler(
            "after RL", sampler, rl.training_client.get_tokenizer(), heldout, cfg["eval_samples"]
        )

    t = time.perf_counter()
    evals.append(asyncio.run(eval_rl()))
    timings["eval after RL"] = round(time.perf_counter() - t, 1)
    print(f"held-out [after RL]: {json.dumps(evals[-1].row())}", flush=True)

    rows = [e.row() for e in evals]
    with (out / "heldout.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    png = plot_curve(
        read_jsonl(out / "sft" / "metrics.jsonl"),
        read_jsonl(out / "rl" / "metrics.jsonl"),
        rows,
        out / "reward_curve.png",
    )
    rollout_id = asyncio.run(first_rollout_id(store_uri))
    timings["total"] = round(time.perf_counter() - t_start, 1)
    summary = {
        "mode": "quick" if args.quick else "full",
        "heldout": rows,
        "timings_s": timings,
        "store": store_uri,
        "sft_model": str(sft_model),
        "reward_curve": str(png),
        "rollout_id": rollout_id,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")

    print("\nHeld-out tasks (never trained on):")
    print(format_table(rows))
    print(f"\ntimings (s): {json.dumps(timings)}")
    print(f"run folder:   {out}/ (store.db, sft/ and rl/ metrics.jsonl, sft/iter-*/adapter, rl/checkpoints)")
    print(f"reward curve: {png}")
    print(f"inspect:      agl store serve --store {store_uri}")
    if rollout_id:
        print(f"one rollout:  agl doctor {rollout_id} --store {store_uri}")
    return summary


if __name__ == "__main__":
    main()
