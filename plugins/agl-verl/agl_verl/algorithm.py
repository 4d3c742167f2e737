"""``VERL``: agl's store-fed rollouts driving verl's PPO/GRPO update on Ray (GPU path).

What runs where: the agl trainer calls :meth:`VERL.run` on its event loop, which owns the store and the
LLM proxy. The verl driver (``AglPPOTrainer``, a ``RayPPOTrainer``) runs in a worker thread and talks to
the FSDP/vLLM Ray workers by RPC; for each batch it asks the event loop (thread-safe) to enqueue the
tasks and wait for the agents' rollouts, which reach vLLM through the proxy so token ids are recorded.

CPU-verified (plugin tests, real verl 0.9.1): the config tree (:func:`~agl_verl.update.compose_verl_config`),
batch building (:mod:`agl_verl.data`) and advantages (:func:`~agl_verl.update.prepare_for_update`).
**Not exercised on a GPU yet:** everything in ``AglPPOTrainer`` below (worker start-up, vLLM server
addresses, log-prob/update RPCs, weight sync); it follows verl 0.9.1's ``main_ppo_v0.TaskRunner`` and
``RayPPOTrainer.fit`` as read from the installed source.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from agl_core.algorithm import Algorithm
from agl_core.types import RolloutMode
from agl_verl.config import VerlConfig
from agl_verl.data import BatchCollector, CollectedBatch, build_data_proto

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
        return await self.collector.collect(handles, timeout=self.timeout)


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
            await asyncio.to_thread(_train_blocking, self.config, bridge, tasks, val_tasks)
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


def _train_blocking(
    config: VerlConfig, bridge: RolloutBridge, tasks: list[Any], val_tasks: list[Any]
) -> None:
    """Build verl's config, workers and trainer, then run the agl-driven loop (GPU only; worker thread)."""
    import ray

    from agl_verl.update import compose_verl_config

    verl_config = compose_verl_config(config)
    if not ray.is_initialized():
        from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

        ray.init(runtime_env=get_ppo_ray_runtime_env(verl_config))
    trainer = _make_trainer(verl_config, config, bridge, tasks, val_tasks)
    trainer.init_workers()
    trainer.fit()


def _make_trainer(
    verl_config: Any, config: VerlConfig, bridge: RolloutBridge, tasks: list[Any], val_tasks: list[Any]
) -> Any:
    """An ``AglPPOTrainer`` wired like verl 0.9.1's ``main_ppo_v0.TaskRunner.run`` (GPU only)."""
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
    from verl.trainer.ppo.metric_utils import compute_data_metrics, reduce_metrics
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.utils.tracking import Tracking

    from agl_verl.update import prepare_for_update

    class AglPPOTrainer(RayPPOTrainer):  # type: ignore[misc]
        """``RayPPOTrainer`` whose generation step is agl rollouts from the store (GPU path, untested)."""

        def __init__(
            self,
            *args: Any,
            agl_config: VerlConfig,
            agl_bridge: RolloutBridge,
            agl_val_tasks: list[Any],
            **kwargs: Any,
        ) -> None:
            super().__init__(*args, **kwargs)
            self.agl_config = agl_config
            self.agl_bridge = agl_bridge
            self.agl_val_tasks = agl_val_tasks

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
            cfg = self.agl_config
            collected = self._agl_rollouts(tasks, "train")
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
            old_log_prob, _ = self._compute_old_log_prob(batch)
            old_log_prob.batch.pop("entropys")
            batch = batch.union(old_log_prob)
            if self.use_reference_policy:
                batch = batch.union(self._compute_ref_log_prob(batch))
            actor_output = self._update_actor(batch)
            self.checkpoint_manager.update_weights(self.global_steps)
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
            self._load_checkpoint()
            self.checkpoint_manager.update_weights(self.global_steps)
            if self.config.trainer.get("val_before_train", True):
                tracking.log(data=self._agl_validate(), step=self.global_steps)
            self.global_steps = 1
            test_freq = self.config.trainer.test_freq
            for _ in range(self.config.trainer.total_epochs):
                for batch_dict in self.train_dataloader:
                    last = self.global_steps >= self.total_training_steps
                    metrics = self._agl_step(list(batch_dict["agl_task"]))
                    if test_freq > 0 and (last or self.global_steps % test_freq == 0):
                        metrics |= self._agl_validate()
                    save_freq = self.config.trainer.save_freq
                    if save_freq > 0 and (last or self.global_steps % save_freq == 0):
                        self._save_checkpoint()
                    tracking.log(data=metrics, step=self.global_steps)
                    if last:
                        return
                    self.global_steps += 1

    return AglPPOTrainer
