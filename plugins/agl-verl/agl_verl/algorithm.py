"""``VERL``: agl's store-fed rollouts driving verl's V1 PPO/GRPO trainer on Ray.

What runs where: the agl trainer calls :meth:`VERL.run` on its event loop, which owns the store and the
LLM proxy. verl's driver (``AglPPOTrainer``, a V1 ``PPOTrainerSync``) runs in a worker thread and talks to
the FSDP/vLLM Ray workers by RPC. Each step, verl's V1 loop asks its agent loop manager for the batch's
prompts; agl's manager (``_AglRollouts``) enqueues their tasks in the store, waits for the agents'
rollouts (which reach vLLM through the proxy, so token ids are recorded), turns their triplets into
samples (:mod:`agl_verl.samples`) and writes them into TransferQueue the way verl's own
``AgentLoopWorkerTQ`` does. verl then samples them from its ``ReplayBuffer`` and runs actor log-probs,
GRPO advantages, the actor update and the weight sync into vLLM on TransferQueue keys.

Trainer path: verl 0.9.1 ships two. The legacy ``RayPPOTrainer`` (``main_ppo_v0``) is ``@deprecated``
("will be removed in v0.9.0", still shipped in 0.9.1, and ``main_ppo`` warns when it is chosen); the
V1 ``PPOTrainer`` (``verl.trainer.ppo.v1``, ``trainer.use_v1=True``, ``main_ppo``'s default) is where
verl is going, so agl-verl drives V1 (``trainer.v1.trainer_mode=sync``). V1's extension point is the
agent loop manager (``TaskRunnerV1.init_agent_loop_manager``: anything with ``generate_sequences`` that
puts its outputs into TransferQueue), which is where agl plugs in: verl keeps its own sampling,
padding to whole mini-batches, advantages, checkpoints and resume. What agl overrides: the dataset (task
indices instead of verl's parquet prompts), validation (agl rollouts with ``val_n``/``val_temperature``),
the rollout-vs-actor log-prob check after ``_compute_old_log_prob``, the ``rollout_data_dir`` dump
(token ids and log-probs), and the step's metrics (``agl/...`` plus verl's, also kept in
:attr:`VERL.history`). GRPO on V1 groups each rollout once (its last sample's reward; verl broadcasts
the advantage to the rollout's other samples), where the legacy path counted every sample of a rollout.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from agl_core.algorithm import Algorithm
from agl_core.types import RolloutMode
from agl_verl.config import VerlConfig, cpu_environment
from agl_verl.data import BatchCollector, CollectedBatch, to_transfer_queue

__all__ = ["VERL", "RolloutBridge"]

logger = logging.getLogger("agl_core.algorithm.verl.algorithm")
T = TypeVar("T")


class RolloutBridge:
    """Lets the verl driver thread run agl rollouts on the event loop that owns the store and proxy.

    Args:
        collector: Builds samples from the store.
        loop: The event loop of :meth:`VERL.run`.
        proxy: The agl LLM proxy (an ``agl_core.llm_proxy.LLMProxy``); its backends follow vLLM.
        model_name: Model name agents ask the proxy for (verl's vLLM serves the model path).
        timeout: Seconds one batch's rollouts may take in total; unfinished ones are cancelled.
    """

    def __init__(
        self,
        collector: BatchCollector,
        loop: asyncio.AbstractEventLoop,
        proxy: Any,
        model_name: str,
        timeout: float,
    ) -> None:
        self.collector = collector
        self.loop = loop
        self.proxy = proxy
        self.model_name = model_name
        self.timeout = timeout

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def point_proxy(self, server_addresses: Sequence[str]) -> None:
        """Route the proxy's model to the vLLM replicas (``host:port``), effective at once."""
        self.proxy.update_backends({self.model_name: [f"http://{addr}/v1" for addr in server_addresses]})

    def rollouts(
        self,
        tasks: Sequence[Any],
        *,
        mode: RolloutMode,
        n: int,
        temperature: float,
        uids: Sequence[str] | None = None,
    ) -> CollectedBatch:
        """Publish the sampling parameters as the ``main_llm`` resource, run the tasks, collect samples.

        ``uids``: each task's group uid (verl's prompt uid); new ones when None.
        """
        return self._call(self._rollouts(tasks, mode=mode, n=n, temperature=temperature, uids=uids))

    async def _rollouts(
        self,
        tasks: Sequence[Any],
        *,
        mode: RolloutMode,
        n: int,
        temperature: float,
        uids: Sequence[str] | None,
    ) -> CollectedBatch:
        resource = self.proxy.as_resource(
            model=self.model_name, sampling_parameters={"temperature": temperature}
        )
        update = await self.collector.store.add_resources({"main_llm": resource})
        handles = await self.collector.enqueue(
            tasks, mode=mode, n=n, resources_id=update.resources_id, uids=uids
        )
        return await self.collector.collect(handles, timeout=self.timeout, flush=self._flush_proxy)

    async def _flush_proxy(self) -> None:
        if not await self.proxy.flush(timeout=60.0):
            logger.warning("The LLM proxy did not write all spans within 60 s; some calls may be missing.")


class VERL(Algorithm):
    """Train the served model with verl (GRPO by default) on rollouts produced by agl agents.

    Args:
        config: A :class:`VerlConfig` or a mapping of its fields; checked at once
            (:class:`~agl_verl.config.VerlConfigError` lists impossible combinations).

    Needs the agl trainer to provide a store (and optionally an adapter and an LLM proxy; one is created
    and started otherwise). ``train_dataset`` / ``val_dataset`` are sequences of task inputs.
    """

    def __init__(self, config: VerlConfig | Mapping[str, Any]) -> None:
        super().__init__()
        self.config = config if isinstance(config, VerlConfig) else VerlConfig(**dict(config))
        self.history: list[dict[str, float]] = []
        """Metrics of every logged step, in order (``{"step": n, ...}``), as sent to verl's loggers."""

    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        """Start Ray and verl's workers, then train; returns when ``total_training_steps`` are done.

        Raises:
            ValueError: no training tasks, fewer than one batch of them, or no store was set.
        """
        if train_dataset is None or len(train_dataset) == 0:
            raise ValueError("VERL.run needs a non-empty train_dataset (a sequence of task inputs).")
        if len(train_dataset) < self.config.train_batch_size:
            raise ValueError(
                f"train_dataset has {len(train_dataset)} tasks, fewer than train_batch_size "
                f"({self.config.train_batch_size}); verl drops incomplete batches, so nothing would train. "
                "Lower train_batch_size or add tasks."
            )
        store = self.get_store()
        adapter = self.get_adapter() if self._has_adapter() else None
        collector = BatchCollector(store, self.config, adapter)
        proxy, started = await self._proxy(store)
        bridge = RolloutBridge(
            collector,
            asyncio.get_running_loop(),
            proxy,
            self.config.model_path,
            self.config.effective_batch_timeout_s,
        )
        tasks = [train_dataset[i] for i in range(len(train_dataset))]
        val_tasks = [val_dataset[i] for i in range(len(val_dataset))] if val_dataset is not None else []
        try:
            await asyncio.to_thread(_train_blocking, self.config, bridge, tasks, val_tasks, self.history)
        finally:
            if started:
                await proxy.stop()

    def _has_adapter(self) -> bool:
        try:
            return self.get_adapter() is not None
        except ValueError:
            return False

    async def _proxy(self, store: Any) -> tuple[Any, bool]:
        proxy = self.get_llm_proxy()
        if proxy is not None:
            if proxy.get_store() is None:
                proxy.set_store(store)
            if not proxy.is_running():
                await proxy.start()
                return proxy, True
            return proxy, False
        from agl_core.llm_proxy import LLMProxy

        proxy = LLMProxy(store=store, host="0.0.0.0")
        await proxy.start()
        return proxy, True


def _use_cpu_platform() -> None:
    """Make this process and its Ray workers load agl's CPU platform for verl (``cpu_platform=True``).

    Sets the variables of :func:`~agl_verl.config.cpu_environment` in ``os.environ`` (the Ray workers
    started from here inherit them) and replaces verl's platform if this process already picked one.
    """
    os.environ.update(cpu_environment())
    from verl.plugin.platform import get_platform, set_platform

    from agl_verl.cpu_platform import PlatformCPU

    if get_platform().device_name != "cpu":
        set_platform(PlatformCPU())


def _init_ray(verl_config: Any, env: Mapping[str, str]) -> None:
    """``ray.init`` as verl's ``run_ppo`` does (``ray_kwargs.ray_init``, verl's runtime env) plus ``env``."""
    import ray
    from omegaconf import OmegaConf
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    if ray.is_initialized():
        return
    init_kwargs = OmegaConf.to_container(verl_config.ray_kwargs.get("ray_init", {}), resolve=True)
    assert isinstance(init_kwargs, dict)
    runtime_env = OmegaConf.to_container(
        OmegaConf.merge(get_ppo_ray_runtime_env(verl_config), init_kwargs.pop("runtime_env", None) or {})
    )
    assert isinstance(runtime_env, dict)
    runtime_env.setdefault("env_vars", {}).update(env)
    ray.init(**{k: v for k, v in init_kwargs.items() if v is not None}, runtime_env=runtime_env)


def _train_blocking(
    config: VerlConfig,
    bridge: RolloutBridge,
    tasks: list[Any],
    val_tasks: list[Any],
    history: list[dict[str, float]],
) -> None:
    """Build verl's config, TransferQueue, workers and V1 trainer, then train (worker thread).

    As verl 0.9.1's ``main_ppo.TaskRunnerV1.run``, in this process instead of a Ray actor.
    """
    env = cpu_environment() if config.cpu_platform else {}
    if config.cpu_platform:
        _use_cpu_platform()
    env["TRANSFER_QUEUE_ENABLE"] = "1"  # what main_ppo.run_ppo gives the workers with transfer_queue.enable
    import ray
    import transfer_queue as tq  # type: ignore[import-not-found]
    from omegaconf import OmegaConf
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from agl_verl.update import compose_verl_config

    verl_config = compose_verl_config(config)
    validate_config(
        config=verl_config,
        use_reference_policy=need_reference_policy(verl_config),
        use_critic=need_critic(verl_config),
    )
    OmegaConf.resolve(verl_config)
    started_ray = not ray.is_initialized()
    _init_ray(verl_config, env)
    try:
        tq.init(verl_config.transfer_queue)
        try:
            trainer = _trainer_class()(
                verl_config,
                agl_config=config,
                agl_bridge=bridge,
                agl_tasks=tasks,
                agl_val_tasks=val_tasks,
                agl_history=history,
            )
            trainer.init()
            trainer.fit(_AglRollouts(trainer))
        finally:
            tq.close()
    finally:
        if started_ray:  # stops verl's workers and vLLM servers too; a Ray the caller started is left alone
            ray.shutdown()


class _TaskDataset:
    """Task indices as a map-style dataset for verl's dataloader (its state is what a checkpoint saves)."""

    def __init__(self, n_tasks: int) -> None:
        self.n_tasks = n_tasks

    def __len__(self) -> int:
        return self.n_tasks

    def __getitem__(self, index: int) -> int:
        return index


def _collate_tasks(items: list[int]) -> dict[str, Any]:
    """A batch as verl's V1 trainer reads it: ``raw_prompt`` (here: task indices) sizes the batch."""
    import torch

    return {"raw_prompt": torch.tensor(items, dtype=torch.long)}


def _plain(value: Any) -> Any:
    """A TensorDict entry as plain Python (``NonTensorStack`` → list, ``NonTensorData`` → its data)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return getattr(value, "data", value)


class _AglRollouts:
    """verl V1's agent loop manager: the prompts' tasks run as agl rollouts, samples into TransferQueue.

    Writes what verl's ``AgentLoopWorkerTQ`` writes: one key ``{uid}_{session}_{index}`` per sample
    (session: the rollout's place in its group; index: the sample's place in the rollout, the last one
    being the rollout's final output), its fields and tags, then the prompt's ``status`` tag
    (``finished``; ``failure`` when none of its rollouts gave a sample, which verl's replay buffer refills).
    """

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer

    def generate_sequences(self, batch: Any) -> None:
        """Run the batch's tasks (blocking: V1's sync trainer samples right after) and store the samples."""
        import transfer_queue as tq  # type: ignore[import-not-found]

        trainer = self.trainer
        cfg: VerlConfig = trainer.agl_config
        uids = [str(uid) for uid in _plain(batch["uid"])]
        step = int(_plain(batch["global_steps"]))
        tasks = [trainer.agl_tasks[int(i)] for i in _plain(batch["raw_prompt"])]
        trainer.agl_bridge.point_proxy(trainer.llm_server_manager.server_addresses)
        started = time.perf_counter()
        collected = trainer.agl_bridge.rollouts(
            tasks, mode="train", n=cfg.rollout_n, temperature=cfg.temperature, uids=uids
        )
        seconds = time.perf_counter() - started  # V1's timing_s/gen is the replay buffer's wait only
        rows = to_transfer_queue(
            collected.samples,
            step=step,
            max_prompt_length=cfg.max_prompt_length,
            max_response_length=cfg.max_response_length,
        )
        if rows.keys:
            fields = _to_tensordict(rows.fields)
            tq.kv_batch_put(keys=rows.keys, partition_id="train", fields=fields, tags=rows.tags)
        trainer.agl_samples.update(zip(rows.keys, rows.samples, strict=True))
        with_samples = {key.rsplit("_", 2)[0] for key in rows.keys}
        status = [
            {
                "is_prompt": True,
                "status": "finished" if uid in with_samples else "failure",
                "global_steps": step,
            }
            for uid in uids
        ]
        tq.kv_batch_put(keys=uids, partition_id="train", tags=status)
        metrics = collected.metrics | rows.metrics | {"agl/skipped_update": float(not rows.keys)}
        metrics["agl/timing_s/rollout"] = seconds
        for key, value in metrics.items():  # a refill of failed groups adds to the step's counts
            add = key.startswith(("agl/n_", "agl/timing_s/"))
            trainer.agl_metrics[key] = trainer.agl_metrics.get(key, 0.0) + value if add else value


def _to_tensordict(fields: list[dict[str, Any]]) -> Any:
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    return list_of_dict_to_tensordict(fields)


def _trainer_class() -> type:
    """Define ``AglPPOTrainer`` lazily (its base class needs verl, Ray, torch and TransferQueue)."""
    import json

    import numpy as np
    import torch
    import transfer_queue as tq  # type: ignore[import-not-found]
    from omegaconf import open_dict
    from torchdata.stateful_dataloader import StatefulDataLoader  # type: ignore[import-not-found]
    from verl.trainer.ppo.utils import create_rl_sampler
    from verl.trainer.ppo.v1 import PPOTrainerSync

    class AglPPOTrainer(PPOTrainerSync):  # type: ignore[misc]
        """verl's V1 sync trainer over agl tasks; rollouts come from :class:`_AglRollouts`."""

        def __init__(
            self,
            config: Any,
            *,
            agl_config: VerlConfig,
            agl_bridge: RolloutBridge,
            agl_tasks: list[Any],
            agl_val_tasks: list[Any],
            agl_history: list[dict[str, float]],
        ) -> None:
            self.agl_config = agl_config
            self.agl_bridge = agl_bridge
            self.agl_tasks = agl_tasks
            self.agl_val_tasks = agl_val_tasks
            self.agl_history = agl_history
            self.agl_metrics: dict[str, float] = {}
            self.agl_samples: dict[str, Any] = {}  # TransferQueue key -> Sample, for rollout_data_dir
            self.agl_training = False
            super().__init__(config)

        def _init_dataloader(self) -> None:
            """The tasks' indices in verl's stateful dataloader (V1's own reads parquet prompts)."""
            data = self.config.data
            self.train_dataset = _TaskDataset(len(self.agl_tasks))
            self.train_dataloader = StatefulDataLoader(
                dataset=self.train_dataset,
                batch_size=data.get("gen_batch_size", None) or data.train_batch_size,
                num_workers=data["dataloader_num_workers"],
                drop_last=True,
                collate_fn=_collate_tasks,
                sampler=create_rl_sampler(data, self.train_dataset),
            )
            self.train_dataloader_it = None
            self.steps_per_epoch = len(self.train_dataset) // data.train_batch_size
            total = self.config.trainer.total_training_steps
            self.total_training_steps = total or self.steps_per_epoch * self.config.trainer.total_epochs
            with open_dict(self.config):
                self.config.actor_rollout_ref.actor.optim.total_training_steps = self.total_training_steps

        def _validate(self) -> dict[str, float]:
            """agl rollouts of the validation tasks (``val_n``, ``val_temperature``); ``val/`` metrics."""
            if not self.agl_val_tasks:
                return {"val/n_rollouts": 0.0}
            cfg = self.agl_config
            self.agl_bridge.point_proxy(self.llm_server_manager.server_addresses)
            collected = self.agl_bridge.rollouts(
                self.agl_val_tasks, mode="val", n=cfg.val_n, temperature=cfg.val_temperature
            )
            metrics = {key.replace("agl/", "val/", 1): value for key, value in collected.metrics.items()}
            if not self.agl_training:  # val_before_train: logged outside a step
                self.agl_history.append({"step": float(self.global_steps), **metrics})
            return metrics

        def on_train_begin(self) -> None:
            super().on_train_begin()
            self.agl_training = True  # from here on, validations are part of a step's metrics

        def step(self, metrics: dict[str, Any], timing_raw: dict[str, Any]) -> Any:
            self.agl_metrics, self.agl_samples = {}, {}
            batch = super().step(metrics, timing_raw)
            metrics.update(self.agl_metrics)
            return batch

        def _compute_old_log_prob(self, batch: Any, metrics: dict[str, Any]) -> Any:
            """verl's, then how close vLLM's sampling log-probs are to the actor's (after a sync: ~0)."""
            batch = super()._compute_old_log_prob(batch, metrics)
            names = ["rollout_log_probs", "old_log_probs", "response_mask"]
            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=names)
            data = data.to_padded_tensor()
            metrics.update(
                _logprob_agreement(data["rollout_log_probs"], data["old_log_probs"], data["response_mask"])
            )
            return batch

        def _compute_metrics(
            self, batch: Any, metrics: dict[str, Any], timing_raw: Any, global_steps: int, epoch: int
        ) -> None:
            super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
            numbers = {k: float(v) for k, v in metrics.items() if isinstance(v, int | float | np.number)}
            self.agl_history.append({"step": float(global_steps), **numbers})

        def _log_rollout_data(self, batch: Any, timing_raw: Any, rollout_data_dir: str) -> None:
            """``<step>.jsonl``: each sample's ids, reward, advantage, sampler and actor log-probs."""
            names = ["advantages", "old_log_probs"]
            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=names)
            data = data.to_padded_tensor()
            os.makedirs(rollout_data_dir, exist_ok=True)
            path = os.path.join(rollout_data_dir, f"{self.global_steps}.jsonl")
            with open(path, "w", encoding="utf-8") as sink:
                for row, key in enumerate(batch.keys):
                    sample = self.agl_samples.get(key)
                    if sample is None:  # verl's padding up to whole mini-batches
                        continue
                    n = len(sample.response_ids)
                    record = {
                        "rollout_id": sample.rollout_id,
                        "uid": sample.uid,
                        "turn_index": sample.turn_index,
                        "prompt_ids": sample.prompt_ids,
                        "response_ids": sample.response_ids,
                        "reward": sample.reward,
                        "advantage": float(data["advantages"][row, 0]),
                        "rollout_log_probs": [None if v != v else v for v in sample.response_logprobs],
                        "old_log_probs": data["old_log_probs"][row, :n].tolist(),
                    }
                    sink.write(json.dumps(record) + "\n")

    def _logprob_agreement(
        rollout: torch.Tensor, actor: torch.Tensor, mask: torch.Tensor
    ) -> dict[str, float]:
        keep = mask.bool() & ~torch.isnan(rollout)
        if not bool(keep.any()):
            return {}
        a, b = rollout[keep].double(), actor.to(rollout.device)[keep].double()
        diff = (a - b).abs()
        out = {
            "agl/rollout_logprob_abs_diff_mean": float(diff.mean()),
            "agl/rollout_logprob_abs_diff_max": float(diff.max()),
            "agl/rollout_logprob_n_tokens": float(keep.sum()),
        }
        if a.numel() > 1 and float(a.std()) > 0 and float(b.std()) > 0:
            out["agl/rollout_actor_logprob_corr"] = float(torch.corrcoef(torch.stack([a, b]))[0, 1])
        return out

    return AglPPOTrainer
