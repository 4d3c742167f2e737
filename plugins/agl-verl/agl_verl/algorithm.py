"""``VERL``: agl's store-fed rollouts driving verl's PPO/GRPO update on Ray.

What runs where: the agl trainer calls :meth:`VERL.run` on its event loop, which owns the store and the
LLM proxy. The verl driver (``AglPPOTrainer``, a ``RayPPOTrainer``) runs in a worker thread and talks to
the FSDP/vLLM Ray workers by RPC; for each batch it asks the event loop (thread-safe) to enqueue the
tasks and wait for the agents' rollouts, which reach vLLM through the proxy so token ids are recorded.
Per step: rollouts → ``DataProto`` → actor log-probs → advantages → actor update → weight sync into vLLM.

Trainer path: verl 0.9.1 ships two. The legacy ``RayPPOTrainer`` (``main_ppo_v0``) is decorated
``@deprecated`` ("will be removed in v0.9.0", yet still shipped in 0.9.1); the V1 ``PPOTrainer``
(``verl.trainer.ppo.v1``, ``trainer.use_v1=True``, the default of ``main_ppo``) is where verl is going:
its ``fit(agent_loop_manager)`` samples each step from a ``ReplayBuffer`` over TransferQueue, which an
``AgentLoopManager`` fills, and runs reward, old log-probs, advantages and the update on TransferQueue
keys rather than on one ``DataProto``. agl-verl drives the **legacy** path (``trainer.use_v1=False``, set
in :func:`agl_verl.update.compose_verl_config`): agl owns the rollout loop, and ``RayPPOTrainer``'s step
methods (``_compute_old_log_prob``, ``_update_actor``, ``_save_checkpoint``, ``_load_checkpoint``) take
the store's batch as one ``DataProto`` in agl's process, with agl's event loop at hand. That path is
what ran end to end (CPU, ``make test-verl``: steps, weight sync, checkpoint and resume). The V1 port
needs: an ``AgentLoopManager`` subclass whose ``generate_sequences`` runs the agl rollouts of the
prompts' tasks through :class:`RolloutBridge` and writes every sample (prompt/response ids,
``response_mask``, the sampler's log-probs, the reward) into TransferQueue's ``train`` partition
(``val`` for validation) under the keys and tags verl's own ``AgentLoopWorkerTQ`` writes
(``{uid}_{session}_{index}``; ``status``, lengths, ``global_steps``/``min_global_steps``/
``max_global_steps`` for its staleness control), plus a prompt-group ``status`` tag; the reward stage fed
by those rewards instead of verl's reward loop; agl's metrics and ``rollout_data_dir`` dump moved to V1's
``_compute_metrics``/``_log_rollout_data``; V1's own resume; and this CPU loop test run on it. It is not
written yet (no time this round); until it is, the supported range stays ``verl>=0.9,<0.10``, which
still ships the legacy trainer.
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
from agl_verl.data import BatchCollector, CollectedBatch, build_data_proto, write_samples

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
        self, tasks: Sequence[Any], *, mode: RolloutMode, n: int, temperature: float
    ) -> CollectedBatch:
        """Publish the sampling parameters as the ``main_llm`` resource, run the tasks, collect samples."""
        return self._call(self._rollouts(tasks, mode=mode, n=n, temperature=temperature))

    async def _rollouts(
        self, tasks: Sequence[Any], *, mode: RolloutMode, n: int, temperature: float
    ) -> CollectedBatch:
        resource = self.proxy.as_resource(
            model=self.model_name, sampling_parameters={"temperature": temperature}
        )
        update = await self.collector.store.add_resources({"main_llm": resource})
        handles = await self.collector.enqueue(tasks, mode=mode, n=n, resources_id=update.resources_id)
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
    """Build verl's config, workers and trainer, then run the agl-driven loop (worker thread)."""
    env = cpu_environment() if config.cpu_platform else {}
    if config.cpu_platform:
        _use_cpu_platform()
    import ray

    from agl_verl.update import compose_verl_config

    verl_config = compose_verl_config(config)
    started_ray = not ray.is_initialized()
    _init_ray(verl_config, env)
    try:
        trainer = _make_trainer(verl_config, config, bridge, tasks, val_tasks, history)
        trainer.init_workers()
        trainer.fit()
    finally:
        if started_ray:  # stops verl's workers and vLLM servers too; a Ray the caller started is left alone
            ray.shutdown()


def _make_trainer(
    verl_config: Any,
    config: VerlConfig,
    bridge: RolloutBridge,
    tasks: list[Any],
    val_tasks: list[Any],
    history: list[dict[str, float]],
) -> Any:
    """An ``AglPPOTrainer`` wired like verl 0.9.1's ``main_ppo_v0.TaskRunner.run``."""
    from omegaconf import OmegaConf
    from verl.trainer.main_ppo_v0 import BaseTaskRunner
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    OmegaConf.resolve(verl_config)
    runner = BaseTaskRunner()
    actor_rollout_cls, worker_group_cls = runner.add_actor_rollout_worker(verl_config)
    runner.add_ref_policy_worker(verl_config, actor_rollout_cls)
    validate_config(
        config=verl_config,
        use_reference_policy=need_reference_policy(verl_config),
        use_critic=need_critic(verl_config),
    )
    model_config = omega_conf_to_dataclass(verl_config.actor_rollout_ref.model)
    trainer_cls = _trainer_class()
    return trainer_cls(
        config=verl_config,
        tokenizer=model_config.tokenizer,
        processor=model_config.processor,
        role_worker_mapping=runner.role_worker_mapping,
        resource_pool_manager=runner.init_resource_pool_mgr(verl_config),
        ray_worker_group_cls=worker_group_cls,
        train_dataset=_TaskDataset(tasks),
        val_dataset=_TaskDataset(val_tasks or tasks[:1]),
        collate_fn=_collate_tasks,
        agl_config=config,
        agl_bridge=bridge,
        agl_val_tasks=val_tasks,
        agl_history=history,
    )


class _TaskDataset:
    """Task inputs as a map-style dataset for verl's dataloader."""

    def __init__(self, tasks: list[Any]) -> None:
        self.tasks = tasks

    def __len__(self) -> int:
        return len(self.tasks)

    def __getitem__(self, index: int) -> Any:
        return self.tasks[index]


def _collate_tasks(items: list[Any]) -> dict[str, Any]:
    import numpy as np

    column = np.empty(len(items), dtype=object)
    column[:] = items
    return {"agl_task": column}


def _trainer_class() -> type:
    """Define ``AglPPOTrainer`` lazily (its base class needs verl, Ray and torch)."""
    import torch
    from verl.trainer.ppo.metric_utils import compute_data_metrics
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.utils.metric import reduce_metrics
    from verl.utils.tracking import Tracking

    from agl_verl.update import prepare_for_update

    class AglPPOTrainer(RayPPOTrainer):  # type: ignore[misc]
        """``RayPPOTrainer`` whose generation step is agl rollouts from the store."""

        def __init__(
            self,
            *args: Any,
            agl_config: VerlConfig,
            agl_bridge: RolloutBridge,
            agl_val_tasks: list[Any],
            agl_history: list[dict[str, float]],
            **kwargs: Any,
        ) -> None:
            super().__init__(*args, **kwargs)
            self.agl_config = agl_config
            self.agl_bridge = agl_bridge
            self.agl_val_tasks = agl_val_tasks
            self.agl_history = agl_history

        def _agl_log(self, tracking: Any, metrics: dict[str, float]) -> None:
            self.agl_history.append({"step": float(self.global_steps), **metrics})
            tracking.log(data=metrics, step=self.global_steps)

        def _agl_rollouts(self, tasks: list[Any], mode: RolloutMode) -> CollectedBatch:
            self.agl_bridge.point_proxy(self.llm_server_manager.server_addresses)
            cfg = self.agl_config
            n = cfg.rollout_n if mode == "train" else cfg.val_n
            temperature = cfg.temperature if mode == "train" else cfg.val_temperature
            return self.agl_bridge.rollouts(tasks, mode=mode, n=n, temperature=temperature)

        def _agl_validate(self) -> dict[str, float]:
            if not self.agl_val_tasks:
                return {}
            collected = self._agl_rollouts(self.agl_val_tasks, "val")
            return {key.replace("agl/", "val/", 1): value for key, value in collected.metrics.items()}

        def _agl_step(self, tasks: list[Any]) -> dict[str, float]:
            """One step; its phases' seconds as ``agl/timing_s/{rollout,old_log_prob,update,weight_sync}``."""
            started = time.perf_counter()
            timing: dict[str, float] = {}
            metrics = self._agl_step_phases(tasks, timing)
            timing["step"] = time.perf_counter() - started
            return metrics | {f"agl/timing_s/{name}": seconds for name, seconds in timing.items()}

        def _agl_step_phases(self, tasks: list[Any], timing: dict[str, float]) -> dict[str, float]:
            cfg = self.agl_config
            clock = time.perf_counter()
            collected = self._agl_rollouts(tasks, "train")
            timing["rollout"] = time.perf_counter() - clock
            self.checkpoint_manager.sleep_replicas()
            metrics = dict(collected.metrics)
            if not collected.samples:
                logger.warning("Step %s: no usable rollout; the update is skipped.", self.global_steps)
                self.checkpoint_manager.update_weights(self.global_steps)
                return metrics | {"agl/skipped_update": 1.0}
            batch, data_metrics = build_data_proto(
                collected.samples,
                pad_token_id=self.tokenizer.pad_token_id,
                max_prompt_length=cfg.max_prompt_length,
                max_response_length=cfg.max_response_length,
            )
            batch, update_metrics = prepare_for_update(batch, cfg)
            metrics |= data_metrics | update_metrics
            if len(batch) == 0:
                self.checkpoint_manager.update_weights(self.global_steps)
                return metrics
            batch.meta_info["temperature"] = cfg.temperature
            batch.meta_info["global_token_num"] = batch.batch["attention_mask"].sum(dim=-1).tolist()
            rollout_log_probs = batch.batch.pop("agl_rollout_log_probs")
            clock = time.perf_counter()
            old_log_prob, _ = self._compute_old_log_prob(batch)
            timing["old_log_prob"] = time.perf_counter() - clock
            old_log_prob.batch.pop("entropys")
            metrics |= _logprob_agreement(
                rollout_log_probs, old_log_prob.batch["old_log_probs"], batch.batch["response_mask"]
            )
            batch = batch.union(old_log_prob)
            if self.use_reference_policy:
                batch = batch.union(self._compute_ref_log_prob(batch))
            clock = time.perf_counter()
            actor_output = self._update_actor(batch)
            timing["update"] = time.perf_counter() - clock
            clock = time.perf_counter()
            self.checkpoint_manager.update_weights(self.global_steps)
            timing["weight_sync"] = time.perf_counter() - clock
            dump_dir = self.config.trainer.get("rollout_data_dir")
            if dump_dir:
                os.makedirs(dump_dir, exist_ok=True)
                write_samples(batch, rollout_log_probs, os.path.join(dump_dir, f"{self.global_steps}.jsonl"))
            metrics |= reduce_metrics(actor_output.meta_info["metrics"])
            metrics |= compute_data_metrics(batch=batch, use_critic=False)
            return metrics

        def fit(self) -> None:
            """agl's loop: rollouts from the store, verl's update, metrics to verl's ``Tracking`` loggers."""
            tracking = Tracking(
                project_name=self.config.trainer.project_name,
                experiment_name=self.config.trainer.experiment_name,
                default_backend=self.config.trainer.logger,
            )
            self.global_steps = 0
            self._load_checkpoint()  # resume_mode: the saved step, weights, optimizer, dataloader position
            self.checkpoint_manager.update_weights(self.global_steps)
            if self.config.trainer.get("val_before_train", True):
                self._agl_log(tracking, self._agl_validate())
            if self.global_steps >= self.total_training_steps:
                logger.warning(
                    "The checkpoint is at step %s of %s: nothing left to train (raise total_training_steps "
                    "or set resume_mode='disable').",
                    self.global_steps,
                    self.total_training_steps,
                )
                return
            first_epoch = self.global_steps // len(self.train_dataloader)
            self.global_steps += 1
            test_freq = self.config.trainer.test_freq
            for _ in range(first_epoch, self.config.trainer.total_epochs):
                for batch_dict in self.train_dataloader:
                    last = self.global_steps >= self.total_training_steps
                    metrics = self._agl_step(list(batch_dict["agl_task"]))
                    if test_freq > 0 and (last or self.global_steps % test_freq == 0):
                        metrics |= self._agl_validate()
                    save_freq = self.config.trainer.save_freq
                    if save_freq > 0 and (last or self.global_steps % save_freq == 0):
                        self._save_checkpoint()
                    self._agl_log(tracking, metrics)
                    if last:
                        return
                    self.global_steps += 1

    def _logprob_agreement(
        rollout: torch.Tensor, actor: torch.Tensor, mask: torch.Tensor
    ) -> dict[str, float]:
        """How close vLLM's sampling log-probs are to the actor's on the same tokens (after a sync: ~0)."""
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
