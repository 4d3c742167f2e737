"""verl-side helpers between a collected batch and the PPO update: the config tree and advantages.

Both run on CPU (the plugin's tests use them with real verl); imports of verl are lazy.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from agl_verl.config import VerlConfig, cpu_verl_tree

if TYPE_CHECKING:
    from omegaconf import DictConfig
    from verl import DataProto

__all__ = ["compose_verl_config", "prepare_for_update"]


def compose_verl_config(config: VerlConfig) -> DictConfig:
    """verl's ``ppo_trainer`` defaults (composed with Hydra from the installed verl) with ``config`` merged.

    verl's tree is in struct mode, so a key it does not know raises ``omegaconf`` ``ConfigKeyError``
    naming it -- which catches a misspelled ``verl_overrides`` entry before Ray starts.
    The legacy (v0) ``RayPPOTrainer`` path is selected (``trainer.use_v1=False``), as agl drives the loop.
    """
    import verl
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        base = compose(config_name="ppo_trainer")
    if config.cpu_platform:
        # some CPU settings are keys verl's schema leaves open (Hydra's `+key=`): merged unchecked
        struct = OmegaConf.is_struct(base)
        OmegaConf.set_struct(base, False)
        base = OmegaConf.merge(base, OmegaConf.create(cpu_verl_tree()))
        OmegaConf.set_struct(base, struct)
    tree = config.to_verl_config()
    tree["trainer"].setdefault("use_v1", False)
    merged = OmegaConf.merge(base, OmegaConf.create(tree))
    return merged  # type: ignore[return-value]


def prepare_for_update(batch: DataProto, config: VerlConfig) -> tuple[DataProto, dict[str, float]]:
    """Drop over-long prompts, compute advantages with verl, and pad to whole PPO mini-batches.

    Uses verl's ``compute_advantage`` (and so ``get_adv_estimator_fn(config.adv_estimator)``) with
    ``token_level_rewards = token_level_scores`` (no KL in the reward). verl's actor update splits the
    batch into mini-batches of ``ppo_mini_batch_size * rollout_n`` samples, but an agent's rollouts give a
    varying number of samples (one per LLM call with ``per_call`` credit), so the batch is padded up to a
    whole number of mini-batches with copies of its own rows whose ``response_mask`` and advantages are
    zero: they add no term and no token to the loss, and no sample is thrown away
    (``agl/n_padding_samples``). Only a batch with no sample left gives ``agl/skipped_update = 1``.
    """
    import numpy as np
    import torch
    from verl.trainer.ppo.ray_trainer import compute_advantage

    metrics: dict[str, float] = {}
    keep = (~batch.batch["is_drop_mask"]).nonzero().flatten().tolist()
    metrics["agl/n_dropped_long_prompts"] = float(len(batch) - len(keep))
    if len(keep) != len(batch):
        batch = batch.select_idxs(np.array(keep, dtype=np.int64))
    metrics["agl/skipped_update"] = float(len(batch) == 0)
    metrics["agl/n_padding_samples"] = 0.0
    if len(batch) == 0:
        return batch, metrics
    batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
    batch = compute_advantage(
        batch,
        adv_estimator=config.adv_estimator,
        num_repeat=config.rollout_n,
        norm_adv_by_std_in_grpo=config.norm_adv_by_std_in_grpo,
    )
    mini = config.ppo_mini_batch_size * config.rollout_n
    missing = -len(batch) % mini
    if missing:
        padding = batch.select_idxs(np.arange(missing, dtype=np.int64) % len(batch))
        for key in ("response_mask", "advantages", "returns", "token_level_rewards", "token_level_scores"):
            if key in padding.batch.keys():  # noqa: SIM118 - TensorDict refuses `in`
                padding.batch[key] = torch.zeros_like(padding.batch[key])
        batch = type(batch).concat([batch, padding])
        metrics["agl/n_padding_samples"] = float(missing)
    return batch, metrics
