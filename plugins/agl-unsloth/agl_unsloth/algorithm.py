"""``SFT``: iterated supervised fine-tuning of the served model on its own best rollouts."""

from __future__ import annotations

import asyncio
import json
import logging
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from agl_core.adapter import TraceToMessages
from agl_core.algorithm import Algorithm
from agl_core.emitter import find_final_reward
from agl_core.llm_proxy import LLMProxy
from agl_core.store import LightningStore
from agl_core.types import Dataset, EnqueueRolloutRequest
from agl_unsloth.data import NoRolloutsKeptError, ScoredRollout, conversations, select_best
from agl_unsloth.engine import Engine, TrainConfig, resolve_engine, train

__all__ = ["SFT"]

logger = logging.getLogger("agl_core.algorithm.unsloth")


class SFT(Algorithm):
    """Serve the model, run rollouts, keep the best, LoRA-fine-tune on their assistant turns, repeat.

    Each of ``n_iterations`` iterations enqueues ``rollouts_per_task`` rollouts of every training task.
    Agents reach the current model as an OpenAI model (``resource_name``, a ``ProxyLLM``) through the LLM
    proxy: an in-process backend returning text, token ids and logprobs (``serving``: transformers, or vLLM's
    offline engine on a GPU when installed; ``auto`` picks vLLM with the unsloth engine when available;
    or ``chat_backend``, one of your own, with its own sampling settings and ``load(model_dir)``, which
    gets each merged model).
    The succeeded rollouts are ranked
    by final reward; those at or above ``reward_threshold`` are kept, at most ``top_k`` of them (or the best
    ``keep_fraction`` without ``top_k``). Their traces become chat conversations (:class:`TraceToMessages`),
    the model gets a fresh LoRA adapter trained with only assistant tokens in the loss, the merged weights
    become the next served model, published as a new resource version. With ``evaluate_final`` a last
    round of rollouts measures the final model (a metrics row with ``kept`` = None).

    The engine is ``unsloth`` (FastLanguageModel + TRL, in a spawned process because unsloth patches TRL
    for the whole process) with a CUDA GPU and unsloth installed, else ``trl`` (transformers + peft + TRL,
    in process). ``engine`` overrides the choice; the choice is logged and in the manifest.

    The run folder gets ``metrics.jsonl``, ``reward.png``, ``manifest.json``,
    ``iter-NNN/{adapter,merged}``. ``reporters`` (or ``$AGL_REPORTERS``) also sends each iteration's
    metrics to ``tensorboard``, ``mlflow`` or ``wandb`` (see `agl_core.reporting`).

    Raises (when constructed):
        FileNotFoundError: ``model_name`` is not a local model folder (with a config.json).
        RuntimeError / ImportError: ``engine="unsloth"`` without a CUDA GPU / without unsloth.
        ValueError: an invalid setting.
    Raises (when run): :class:`NoRolloutsKeptError` when an iteration keeps no rollout.
    """

    def __init__(
        self,
        *,
        model_name: str | Path,
        engine: Engine = "auto",
        serving: str = "auto",
        n_iterations: int = 3,
        rollouts_per_task: int = 4,
        top_k: int | None = None,
        keep_fraction: float = 0.25,
        reward_threshold: float | None = None,
        lora_rank: int = 16,
        lora_alpha: int = 32,
        learning_rate: float = 2e-4,
        epochs: float = 1.0,
        max_steps: int = -1,
        batch_size: int = 4,
        max_length: int = 1024,
        load_in_4bit: bool = False,
        max_tokens: int = 256,
        temperature: float = 1.0,
        evaluate_final: bool = True,
        run_dir: str | Path = "agl-unsloth-run",
        resource_name: str = "main_llm",
        model_alias: str = "agl-sft",
        rollout_timeout: float = 600.0,
        train_timeout: float = 3600.0,
        seed: int = 0,
        progress: bool | None = None,
        reporters: Sequence[str] | None = None,
        chat_backend: Any = None,
    ) -> None:
        folder = Path(model_name)
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(
                f"model_name={str(model_name)!r} is not a local model folder with a config.json; download or "
                "save the model first (e.g. `hf download <repo> --local-dir <folder>`) and pass the folder."
            )
        if n_iterations < 1 or rollouts_per_task < 1:
            raise ValueError("n_iterations and rollouts_per_task must be >= 1.")
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k must be >= 1 (or None to use keep_fraction), got {top_k}.")
        if not 0.0 < keep_fraction <= 1.0:
            raise ValueError(f"keep_fraction must be in (0, 1], got {keep_fraction}.")
        from agl_unsloth.serving import resolve_serving

        self.engine = resolve_engine(engine)
        self.serving = resolve_serving(serving, self.engine)
        logger.info("agl-unsloth: engine=%s (requested %s), serving=%s", self.engine, engine, self.serving)
        self.model_name = folder
        self.n_iterations = n_iterations
        self.rollouts_per_task = rollouts_per_task
        self.top_k = top_k
        self.keep_fraction = keep_fraction
        self.reward_threshold = reward_threshold
        self.train_config = TrainConfig(
            lora_rank=lora_rank,
            lora_alpha=lora_alpha,
            learning_rate=learning_rate,
            epochs=epochs,
            max_steps=max_steps,
            batch_size=batch_size,
            max_length=max_length,
            seed=seed,
            load_in_4bit=load_in_4bit,
            timeout_s=train_timeout,
        )
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.evaluate_final = evaluate_final
        self.run_dir = Path(run_dir)
        self.resource_name = resource_name
        self.model_alias = model_alias
        self.rollout_timeout = rollout_timeout
        self.seed = seed
        self.progress = progress
        self.reporters = reporters
        self.chat_backend = chat_backend
        self.current_model: Path = folder
        self.manifest: dict[str, Any] = {}

    # -- helpers ----------------------------------------------------------------------------------

    def _adapter(self) -> TraceToMessages:
        try:
            adapter = self.get_adapter()
        except ValueError:
            adapter = None
        return adapter if isinstance(adapter, TraceToMessages) else TraceToMessages()

    async def _publish(self, store: LightningStore, proxy: LLMProxy, chat: Any, version: int) -> str:
        alias = f"{self.model_alias}-v{version}"
        chat.model = alias
        proxy.update_backends({alias: chat})
        update = await store.add_resources({self.resource_name: proxy.as_resource(model=alias)})
        return update.resources_id

    async def _rollouts(
        self, store: LightningStore, proxy: LLMProxy, tasks: Dataset[Any], resources_id: str
    ) -> list[ScoredRollout]:
        requests = [
            EnqueueRolloutRequest(input=tasks[i], mode="train", resources_id=resources_id)
            for i in range(len(tasks))
            for _ in range(self.rollouts_per_task)
        ]
        ids = [r.rollout_id for r in await store.enqueue_many_rollouts(requests)]
        finished = await store.wait_for_rollouts(rollout_ids=ids, timeout=self.rollout_timeout)
        if len(finished) < len(ids):
            raise TimeoutError(
                f"Only {len(finished)} of {len(ids)} rollouts finished within rollout_timeout="
                f"{self.rollout_timeout}s; are runners working this store?"
            )
        await proxy.flush(30.0)
        adapter = self._adapter()
        out = []
        for rollout in finished:
            spans = list((await store.query_spans(rollout.rollout_id, "latest")).items)
            ok = rollout.status == "succeeded"
            out.append(
                ScoredRollout(
                    rollout.rollout_id,
                    find_final_reward(spans) if ok else None,
                    rollout.status,
                    adapter.adapt(spans) if ok else [],
                )
            )
        return out

    def _write_manifest(self) -> None:
        path = self.run_dir / "manifest.json"
        path.write_text(json.dumps(self.manifest, indent=2), encoding="utf-8")

    # -- the loop ---------------------------------------------------------------------------------

    async def run(
        self, train_dataset: Dataset[Any] | None = None, val_dataset: Dataset[Any] | None = None
    ) -> None:
        """Run ``n_iterations`` of rollouts + selection + LoRA SFT on ``train_dataset`` (val is unused)."""
        from agl_core.reporting import open_reporters, reporter_names
        from agl_unsloth.progress import IterationView, plot_rewards, read_metrics
        from agl_unsloth.serving import TransformersChatBackend, VllmChatBackend

        if train_dataset is None or len(train_dataset) == 0:
            raise ValueError("SFT needs a non-empty train_dataset (the tasks to run).")
        store = self.get_store()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        metrics_path = self.run_dir / "metrics.jsonl"
        self.manifest = {
            "base_model": str(self.model_name),
            "engine": self.engine,
            "serving": self.serving if self.chat_backend is None else "custom",
            "train_config": asdict(self.train_config),
            "selection": {
                "top_k": self.top_k,
                "keep_fraction": self.keep_fraction,
                "reward_threshold": self.reward_threshold,
            },
            "iterations": [],
            "final_model": str(self.model_name),
        }
        device = "cuda" if self.engine == "unsloth" else "cpu"
        chat = self.chat_backend
        if chat is None:
            backend_cls = VllmChatBackend if self.serving == "vllm" else TransformersChatBackend
            chat = backend_cls(
                self.model_name,
                model=self.model_alias,
                max_tokens=self.max_tokens,
                temperature=self.temperature,
                device=device,
                seed=self.seed,
            )
        # opened before the proxy starts: a missing tracker fails here, with nothing to clean up
        names = ["jsonl", *reporter_names(self.reporters)]  # metrics.jsonl always: the reward plot reads it
        reporters = open_reporters(names, run_dir=self.run_dir, config=self.manifest["train_config"])
        proxy = self.get_llm_proxy()
        own = proxy is None
        proxy = proxy or LLMProxy({self.model_alias: chat}, store=store)
        started = not proxy.is_running()
        if started:
            await proxy.start()
        rounds = self.n_iterations + (1 if self.evaluate_final else 0)
        try:
            with IterationView(self.n_iterations, self.progress) as view:
                for iteration in range(1, rounds + 1):
                    t0 = time.perf_counter()
                    resources_id = await self._publish(store, proxy, chat, iteration - 1)
                    rollouts = await self._rollouts(store, proxy, train_dataset, resources_id)
                    rewards = [r.reward or 0.0 for r in rollouts]
                    row: dict[str, Any] = {
                        "iteration": iteration,
                        "served_model": str(self.current_model),
                        "resources_id": resources_id,
                        "rollouts": len(rollouts),
                        "failed": sum(r.status != "succeeded" for r in rollouts),
                        "reward_mean": statistics.fmean(rewards),
                        "reward_max": max(rewards),
                        "kept": None,
                    }
                    if iteration <= self.n_iterations:
                        row.update(await self._train_on(iteration, rollouts))
                    row["iteration_time_s"] = round(time.perf_counter() - t0, 3)
                    reporters.log(iteration, row)
                    view.update(row)
                    if iteration <= self.n_iterations:
                        chat.load(self.current_model)
        finally:
            reporters.close()
            if started or own:
                await proxy.stop()
            plot_rewards(read_metrics(metrics_path), self.run_dir / "reward.png")

    async def _train_on(self, iteration: int, rollouts: list[ScoredRollout]) -> dict[str, Any]:
        kept = select_best(
            rollouts,
            top_k=self.top_k,
            keep_fraction=self.keep_fraction,
            reward_threshold=self.reward_threshold,
        )
        if not kept:
            best = max((r.reward for r in rollouts if r.reward is not None), default=None)
            raise NoRolloutsKeptError(
                f"Iteration {iteration}: none of {len(rollouts)} rollouts was kept (best reward {best}, "
                f"reward_threshold={self.reward_threshold}); lower reward_threshold, or check that the agent "
                "succeeds, emits a reward and calls the served model."
            )
        rows = conversations(kept)
        out_dir = self.run_dir / f"iter-{iteration:03d}"
        t0 = time.perf_counter()
        result = await asyncio.to_thread(
            train, self.engine, self.current_model, rows, out_dir, self.train_config
        )
        losses = result["losses"]
        self.current_model = Path(result["merged_dir"])
        record = {
            "iteration": iteration,
            "trained_from": str(self.manifest["final_model"]),
            "adapter_dir": result["adapter_dir"],
            "merged_dir": result["merged_dir"],
            "kept": len(kept),
            "conversations": len(rows),
            "kept_reward_mean": statistics.fmean(r.reward or 0.0 for r in kept),
            "loss_first": losses[0] if losses else None,
            "loss_last": losses[-1] if losses else None,
        }
        self.manifest["iterations"].append(record)
        self.manifest["final_model"] = result["merged_dir"]
        self._write_manifest()
        return {
            "kept": len(kept),
            "conversations": len(rows),
            "kept_reward_mean": record["kept_reward_mean"],
            "losses": losses,
            "loss_first": record["loss_first"],
            "loss_last": record["loss_last"],
            "train_time_s": round(time.perf_counter() - t0, 3),
        }
