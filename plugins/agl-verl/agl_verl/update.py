"""verl's config tree with agl's settings merged (runs on CPU; the plugin's tests use it with real verl).

Imports of verl are lazy.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from agl_verl.config import VerlConfig, cpu_verl_tree

if TYPE_CHECKING:
    from omegaconf import DictConfig

__all__ = ["compose_verl_config"]


def compose_verl_config(config: VerlConfig) -> DictConfig:
    """verl's ``ppo_trainer`` defaults (composed with Hydra from the installed verl) with ``config`` merged.

    verl's tree is in struct mode, so a key it does not know raises ``omegaconf`` ``ConfigKeyError``
    naming it -- which catches a misspelled ``verl_overrides`` entry before Ray starts.
    verl's V1 trainer is selected (``trainer.use_v1=True``, ``trainer.v1.trainer_mode=sync``) with
    TransferQueue on (``transfer_queue.enable``), as ``main_ppo.TaskRunnerV1`` sets it.
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
    tree["trainer"].setdefault("use_v1", True)
    tree["trainer"].setdefault("v1", {}).setdefault("trainer_mode", "sync")
    tree.setdefault("transfer_queue", {})["enable"] = True
    merged = OmegaConf.merge(base, OmegaConf.create(tree))
    return merged  # type: ignore[return-value]
