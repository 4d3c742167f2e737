"""The CPU platform for verl (``cpu_platform=True``): its config, environment and platform answers."""

from __future__ import annotations

import pytest

from agl_verl import VerlConfig, VerlConfigError
from agl_verl.config import CPU_PLATFORM_MODULE, cpu_environment
from agl_verl.update import compose_verl_config


def _cpu(**fields: object) -> VerlConfig:
    return VerlConfig(
        model_path="/m", cpu_platform=True, rollout_n=2, train_batch_size=4, ppo_mini_batch_size=4, **fields
    )


def test_cpu_settings_land_in_verls_tree_and_misspellings_are_still_caught() -> None:
    from omegaconf.errors import ConfigKeyError

    tree = compose_verl_config(_cpu(ppo_micro_batch_size_per_gpu=4))
    assert tree.trainer.device == "cpu"
    assert tree.actor_rollout_ref.actor.strategy == "fsdp2"
    assert tree.actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype == "fp32"
    assert tree.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    assert tree.actor_rollout_ref.rollout.enforce_eager is True
    assert tree.ray_kwargs.ray_init.num_gpus == 1
    with pytest.raises(ConfigKeyError, match="enforce_eagerr"):
        compose_verl_config(_cpu(verl_overrides={"actor_rollout_ref.rollout.enforce_eagerr": True}))


def test_cpu_platform_refuses_what_it_cannot_run() -> None:
    with pytest.raises(VerlConfigError, match="n_gpus_per_node=1") as info:
        _cpu(n_gpus_per_node=2, use_kl_loss=True, ppo_micro_batch_size_per_gpu=2)
    assert "use_kl_loss=False" in str(info.value)


def test_cpu_environment_loads_the_platform_through_verls_hook() -> None:
    env = cpu_environment()
    assert env["VERL_USE_EXTERNAL_MODULES"] == CPU_PLATFORM_MODULE == "agl_verl.cpu_platform"
    assert env["VERL_PLATFORM"] == "cpu" and env["VERL_ENGINE_DEVICE"] == "cuda"


def test_the_platform_answers_for_the_cpu_and_fixes_verls_backend_string() -> None:
    from verl.plugin.platform import PlatformRegistry

    from agl_verl import cpu_platform

    platform = PlatformRegistry.get("cpu")
    assert platform is cpu_platform.PlatformCPU
    cpu = platform()
    assert (cpu.device_name, cpu.communication_backend_name(), cpu.ray_resource_name()) == (
        "cpu",
        "gloo",
        "GPU",
    )
    assert not cpu.is_ipc_supported() and not cpu.is_platform_available(use_smi_check=True)
    assert cpu.device_module.memory_allocated() == 0 and cpu.device_module.mem_get_info()[1] > 0
    seen: list[str] = []
    wrapped = cpu_platform._dedup_backend(lambda **kwargs: seen.append(kwargs["backend"]))
    wrapped(backend="cpu:gloo,cpu:gloo")
    wrapped(backend="cpu:gloo,cuda:nccl")
    assert seen == ["cpu:gloo", "cpu:gloo,cuda:nccl"]
