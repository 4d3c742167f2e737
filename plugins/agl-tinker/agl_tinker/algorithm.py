"""``Tinker``: on-policy RL of agents through the Tinker training API (hosted, or the local CPU stand-in)."""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agl_core.adapter import LlmProxyTraceToTriplet
from agl_core.algorithm import Algorithm
from agl_core.emitter import find_final_reward
from agl_core.llm_proxy import LLMProxy
from agl_core.store import LightningStore
from agl_core.types import Dataset, EnqueueRolloutRequest, Triplet

__all__ = ["LossFn", "Tinker"]

logger = logging.getLogger("agl_core.algorithm.tinker")

LossFn = Literal["importance_sampling", "ppo", "cross_entropy"]
_LOSS_FNS = ("importance_sampling", "ppo", "cross_entropy")


@dataclass
class _Rollout:
    """One finished rollout of a step: its group, reward and proxy-recorded LLM calls."""

    group: int
    reward: float
    status: str
    triplets: list[Triplet] = field(default_factory=list)


class Tinker(Algorithm):
    """RL on the Tinker API: sample through the LLM proxy, train on the exact sampled tokens, repeat.

    Each step takes ``batch_size`` tasks from the train dataset and enqueues ``group_size`` rollouts of
    each. Agents reach the current sampler as an OpenAI model (``resource_name``, a ``ProxyLLM``) served
    by an in-process proxy backend. When the rollouts finish, every proxy-recorded LLM call of a rollout
    (multi-turn agents make several) becomes a ``tinker.types.Datum`` built from the exact prompt and
    sampled token ids and logprobs, with the rollout's group-relative advantage on the response tokens and
    0 on the prompt. Then ``forward_backward(loss_fn)``, ``optim_step(AdamParams)`` and
    ``save_weights_and_get_sampling_client``; the new sampler is served from the next step on.

    Args:
        model_name: the base model (a Tinker model name; a local folder with ``backend="local"``).
        backend: ``"remote"`` (the hosted service, configured by ``TINKER_API_KEY`` / ``TINKER_BASE_URL``
            or ``api_key``/``base_url``) or ``"local"`` (transformers on CPU, for offline development and
            tests; see :mod:`agl_tinker.local`).
        lora_rank: LoRA rank (``0`` with the local backend: full fine-tuning).
        learning_rate / adam_betas / adam_eps / weight_decay / grad_clip_norm: ``AdamParams``.
        loss_fn: ``importance_sampling`` (default), ``ppo`` (clip via ``loss_fn_config``) or
            ``cross_entropy`` (weights = advantages: a plain policy-gradient step).
        group_size / batch_size: rollouts per task / tasks per step.
        n_steps: training steps (default: one pass over the train dataset).
        max_tokens / temperature / top_k / top_p: sampling defaults (a request may lower ``max_tokens``).
        normalize_advantages: divide by the group std as well as centring.
        save_every: ``save_state`` every N steps (and at the end); 0 disables checkpoints.
        resume_from: a checkpoint path, or ``"latest"`` for the last one recorded in ``run_dir``.
        run_dir: metrics.jsonl, reward.png, checkpoints.jsonl (and local checkpoints) go here.
        rollout_timeout: seconds to wait for one step's rollouts.
        preflight_timeout: seconds the hosted service gets to accept a TCP connection.
        progress: live table (True), log lines (False), or live only on a TTY (None).
        reporters: trackers that also get each step's metrics (``tensorboard``, ``mlflow``, ``wandb``; None
            reads ``$AGL_REPORTERS``); metrics.jsonl is always written. See `agl_core.reporting`.
        service_client: use this client instead of building one (for custom deployments).
    """

    def __init__(
        self,
        *,
        model_name: str,
        backend: Literal["remote", "local"] = "remote",
        lora_rank: int = 32,
        learning_rate: float = 1e-4,
        adam_betas: tuple[float, float] = (0.9, 0.95),
        adam_eps: float = 1e-8,
        weight_decay: float = 0.0,
        grad_clip_norm: float = 0.0,
        loss_fn: LossFn = "importance_sampling",
        loss_fn_config: dict[str, float] | None = None,
        group_size: int = 4,
        batch_size: int = 4,
        n_steps: int | None = None,
        max_tokens: int = 256,
        temperature: float = 1.0,
        top_k: int = -1,
        top_p: float = 1.0,
        normalize_advantages: bool = False,
        save_every: int = 0,
        resume_from: str | None = None,
        run_dir: str | Path = "agl-tinker-run",
        resource_name: str = "main_llm",
        model_alias: str | None = None,
        rollout_timeout: float = 600.0,
        base_url: str | None = None,
        api_key: str | None = None,
        preflight_timeout: float = 5.0,
        seed: int = 0,
        progress: bool | None = None,
        service_client: Any = None,
        reporters: Sequence[str] | None = None,
    ) -> None:
        if backend not in ("remote", "local"):
            raise ValueError(f"backend must be 'remote' or 'local', not {backend!r}.")
        if loss_fn not in _LOSS_FNS:
            raise ValueError(f"loss_fn must be one of {', '.join(_LOSS_FNS)}; got {loss_fn!r}.")
        if group_size < 2:
            raise ValueError("group_size must be >= 2: advantages are relative to the task's group.")
        if batch_size < 1 or (n_steps is not None and n_steps < 0) or save_every < 0:
            raise ValueError("batch_size must be >= 1, n_steps >= 0 and save_every >= 0.")
        self.model_name = model_name
        self.backend = backend
        self.lora_rank = lora_rank
        self.learning_rate = learning_rate
        self.adam_betas = adam_betas
        self.adam_eps = adam_eps
        self.weight_decay = weight_decay
        self.grad_clip_norm = grad_clip_norm
        self.loss_fn: LossFn = loss_fn
        self.loss_fn_config = loss_fn_config
        self.group_size = group_size
        self.batch_size = batch_size
        self.n_steps = n_steps
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.top_k = top_k
        self.top_p = top_p
        self.normalize_advantages = normalize_advantages
        self.save_every = save_every
        self.resume_from = resume_from
        self.run_dir = Path(run_dir)
        self.resource_name = resource_name
        self.model_alias = model_alias or f"agl-tinker/{model_name}"
        self.rollout_timeout = rollout_timeout
        self.base_url = base_url
        self.api_key = api_key
        self.preflight_timeout = preflight_timeout
        self.seed = seed
        self.reporters = reporters
        self.progress = progress
        self.service_client = service_client
        self.training_client: Any = None
        self.step = 0

    # -- clients ----------------------------------------------------------------------------------

    async def connect(self) -> Any:
        """The service client: the given one, a local one, or the hosted one (key check + fast preflight)."""
        if self.service_client is None:
            if self.backend == "local":
                from agl_tinker.local import LocalServiceClient

                self.service_client = LocalServiceClient(
                    checkpoint_dir=self.run_dir / "checkpoints", seed=self.seed
                )
            else:
                from agl_tinker.remote import connect_service

                self.service_client = await connect_service(
                    self.base_url, self.api_key, self.preflight_timeout
                )
        return self.service_client

    def _adam(self) -> Any:
        from tinker import types

        return types.AdamParams(
            learning_rate=self.learning_rate,
            beta1=self.adam_betas[0],
            beta2=self.adam_betas[1],
            eps=self.adam_eps,
            weight_decay=self.weight_decay,
            grad_clip_norm=self.grad_clip_norm,
        )

    def _checkpoint_index(self) -> Path:
        return self.run_dir / "checkpoints.jsonl"

    def latest_checkpoint(self) -> dict[str, Any] | None:
        """The last checkpoint recorded in ``run_dir`` (``{"step", "path", "name"}``), or None."""
        index = self._checkpoint_index()
        if not index.is_file():
            return None
        lines = [line for line in index.read_text(encoding="utf-8").splitlines() if line.strip()]
        return json.loads(lines[-1]) if lines else None

    async def _resume(self, training_client: Any) -> int:
        if self.resume_from is None:
            return 0
        record = self.latest_checkpoint() if self.resume_from == "latest" else None
        if self.resume_from == "latest" and record is None:
            raise FileNotFoundError(
                f"resume_from='latest' but {self._checkpoint_index()} lists no checkpoint."
            )
        path = record["path"] if record else self.resume_from
        if record is None:
            known = [r for r in self._all_checkpoints() if r["path"] == path]
            record = known[-1] if known else {"step": 0, "path": path}
        await training_client.load_state_with_optimizer(path)
        logger.info("tinker: resumed from %s at step %s", path, record["step"])
        return int(record["step"])

    def _all_checkpoints(self) -> list[dict[str, Any]]:
        index = self._checkpoint_index()
        if not index.is_file():
            return []
        return [json.loads(line) for line in index.read_text(encoding="utf-8").splitlines() if line.strip()]

    async def _save(self, training_client: Any, step: int) -> None:
        name = f"step-{step:06d}"
        saved = await training_client.save_state(name)
        record = {"step": step, "path": saved.path, "name": name}
        with self._checkpoint_index().open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")

    # -- the loop ---------------------------------------------------------------------------------

    async def run(
        self, train_dataset: Dataset[Any] | None = None, val_dataset: Dataset[Any] | None = None
    ) -> None:
        """Train on ``train_dataset`` for ``n_steps`` steps (``val_dataset`` is not used yet)."""
        from agl_tinker.backend import TinkerChatBackend
        from agl_tinker.progress import MetricsLog, ProgressView, plot_rewards

        if train_dataset is None or len(train_dataset) == 0:
            raise ValueError("Tinker needs a non-empty train_dataset (the tasks to enqueue).")
        store = self.get_store()
        service = await self.connect()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        training_client = await service.create_lora_training_client(self.model_name, rank=self.lora_rank)
        self.training_client = training_client
        self.step = await self._resume(training_client)
        tokenizer = training_client.get_tokenizer()
        sampler = await training_client.save_weights_and_get_sampling_client()
        chat = TinkerChatBackend(
            sampler,
            tokenizer,
            model=self.model_alias,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
        )
        n_steps = self.n_steps if self.n_steps is not None else max(1, len(train_dataset) // self.batch_size)
        # opened before the proxy starts: a missing tracker fails here, with nothing to clean up
        config = {
            "model_name": self.model_name,
            "learning_rate": self.learning_rate,
            "lora_rank": self.lora_rank,
        }
        config.update(loss_fn=self.loss_fn, group_size=self.group_size, batch_size=self.batch_size)
        metrics_log = MetricsLog(self.run_dir, self.reporters, config)
        proxy = self.get_llm_proxy()
        own_proxy = proxy is None
        if proxy is None:
            proxy = LLMProxy({self.model_alias: chat}, store=store)
        else:
            proxy.update_backends({self.model_alias: chat})
        started = not proxy.is_running()
        if started:
            await proxy.start()
        adapter = self._adapter()
        try:
            update = await store.add_resources(
                {self.resource_name: proxy.as_resource(model=self.model_alias)}
            )
            with ProgressView(n_steps, self.progress) as view:
                while self.step < n_steps:
                    metrics = await self._train_step(
                        store, proxy, adapter, training_client, train_dataset, update.resources_id
                    )
                    self.step += 1
                    metrics["step"] = self.step
                    chat.set_sampler(await training_client.save_weights_and_get_sampling_client())
                    if self.save_every and (self.step % self.save_every == 0 or self.step == n_steps):
                        await self._save(training_client, self.step)
                    metrics_log.append(metrics)
                    view.update(metrics)
        finally:
            metrics_log.close()
            if started or own_proxy:
                await proxy.stop()
            plot_rewards(metrics_log.read(), self.run_dir / "reward.png")

    def _adapter(self) -> LlmProxyTraceToTriplet:
        try:
            adapter = self.get_adapter()
        except ValueError:
            adapter = None
        return adapter if isinstance(adapter, LlmProxyTraceToTriplet) else LlmProxyTraceToTriplet()

    async def _collect(
        self,
        store: LightningStore,
        proxy: LLMProxy,
        adapter: LlmProxyTraceToTriplet,
        tasks: list[Any],
        resources_id: str,
    ) -> list[_Rollout]:
        requests = [
            EnqueueRolloutRequest(input=task, mode="train", resources_id=resources_id, metadata={"group": g})
            for g, task in enumerate(tasks)
            for _ in range(self.group_size)
        ]
        enqueued = await store.enqueue_many_rollouts(requests)
        ids = [r.rollout_id for r in enqueued]
        finished = await store.wait_for_rollouts(rollout_ids=ids, timeout=self.rollout_timeout)
        if len(finished) < len(ids):
            raise TimeoutError(
                f"Only {len(finished)} of {len(ids)} rollouts finished within rollout_timeout="
                f"{self.rollout_timeout}s; are runners working this store?"
            )
        await proxy.flush(30.0)
        out = []
        for request, rollout in zip(requests, finished, strict=True):
            spans = list((await store.query_spans(rollout.rollout_id, "latest")).items)
            reward = find_final_reward(spans) if rollout.status == "succeeded" else None
            triplets = adapter.adapt(spans) if rollout.status == "succeeded" else []
            group = int((request.metadata or {})["group"])
            out.append(_Rollout(group, float(reward or 0.0), rollout.status, triplets))
        return out

    async def _train_step(
        self,
        store: LightningStore,
        proxy: LLMProxy,
        adapter: LlmProxyTraceToTriplet,
        training_client: Any,
        dataset: Dataset[Any],
        resources_id: str,
    ) -> dict[str, Any]:
        from agl_tinker.data import datum_from_call, group_advantages, sampled_logprobs

        t0 = time.perf_counter()
        start = self.step * self.batch_size
        tasks = [dataset[(start + i) % len(dataset)] for i in range(self.batch_size)]
        rollouts = await self._collect(store, proxy, adapter, tasks, resources_id)
        t_sample = time.perf_counter() - t0
        data = []
        tokens = skipped = 0
        for group in range(len(tasks)):
            members = [r for r in rollouts if r.group == group]
            advantages = group_advantages(
                [r.reward for r in members], normalize_std=self.normalize_advantages
            )
            for rollout, advantage in zip(members, advantages, strict=True):
                if advantage == 0.0:
                    continue
                for triplet in rollout.triplets:
                    prompt_ids, response_ids = triplet.prompt["token_ids"], triplet.response["token_ids"]
                    logprobs = sampled_logprobs(triplet.response)
                    if self.loss_fn != "cross_entropy" and (
                        logprobs is None or len(logprobs) != len(response_ids)
                    ):
                        skipped += 1
                        continue
                    data.append(datum_from_call(prompt_ids, response_ids, logprobs, advantage, self.loss_fn))
                    tokens += len(prompt_ids) + len(response_ids)
        loss = None
        t1 = time.perf_counter()
        if data:
            fwd = training_client.forward_backward(data, self.loss_fn, self.loss_fn_config)
            opt = training_client.optim_step(self._adam())
            result = await fwd
            await opt
            loss = result.metrics.get("loss:sum")
        rewards = [r.reward for r in rollouts]
        return {
            "reward_mean": statistics.fmean(rewards),
            "reward_std": statistics.pstdev(rewards),
            "rollouts": len(rollouts),
            "failed": sum(r.status != "succeeded" for r in rollouts),
            "llm_calls": sum(len(r.triplets) for r in rollouts),
            "datums": len(data),
            "skipped_calls": skipped,
            "tokens": tokens,
            "loss": loss,
            "sample_time_s": round(t_sample, 4),
            "train_time_s": round(time.perf_counter() - t1, 4),
            "step_time_s": round(time.perf_counter() - t0, 4),
        }
