"""verl-side helpers between a collected batch and the PPO update: the config tree and advantages.

Both run on CPU (the plugin's tests use them with real verl); imports of verl are lazy.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from agl_verl.config import VerlConfig

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
    tree = config.to_verl_config()
    tree["trainer"].setdefault("use_v1", False)
    merged = OmegaConf.merge(base, OmegaConf.create(tree))
    return merged  # type: ignore[return-value]


def prepare_for_update(batch: DataProto, config: VerlConfig) -> tuple[DataProto, dict[str, float]]:
    """Drop over-long prompts, compute advantages with verl, and cut to whole PPO mini-batches.

    Uses verl's ``compute_advantage`` (and so ``get_adv_estimator_fn(config.adv_estimator)``) with
    ``token_level_rewards = token_level_scores`` (no KL in the reward). The batch is then truncated to
    a multiple of ``ppo_mini_batch_size * rollout_n`` samples (verl's actor update splits it that way);
    fewer samples than one mini-batch give an empty batch and ``agl/skipped_update = 1``.
    """
    import numpy as np
    from verl.trainer.ppo.ray_trainer import compute_advantage

    metrics: dict[str, float] = {}
    keep = (~batch.batch["is_drop_mask"]).nonzero().flatten().tolist()
    metrics["agl/n_dropped_long_prompts"] = float(len(batch) - len(keep))
    if len(keep) != len(batch):
        batch = batch.select_idxs(np.array(keep, dtype=np.int64))
    batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
    batch = compute_advantage(
        batch,
        adv_estimator=config.adv_estimator,
        num_repeat=config.rollout_n,
        norm_adv_by_std_in_grpo=config.norm_adv_by_std_in_grpo,
    )
    mini = config.ppo_mini_batch_size * config.rollout_n
    usable = (len(batch) // mini) * mini
    metrics["agl/n_samples_cut_to_minibatch"] = float(len(batch) - usable)
    metrics["agl/skipped_update"] = float(usable == 0)
    if usable != len(batch):
        order = np.random.permutation(len(batch))[:usable]
        batch = batch.select_idxs(np.sort(order))
    return batch, metrics
