"""Typed configuration of the ``verl`` algorithm, its validation, and its mapping onto verl's config tree.

Defaults fit one GPU with a small model. Impossible combinations raise :class:`VerlConfigError` when the
config is built, long before Ray or any GPU worker starts.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CPU_PLATFORM_MODULE",
    "GROUP_ESTIMATORS",
    "VerlConfig",
    "VerlConfigError",
    "cpu_environment",
    "cpu_verl_tree",
]

#: Advantage estimators that normalise within a group of samples of the same task (need ``rollout_n >= 2``).
GROUP_ESTIMATORS = frozenset(
    {"grpo", "rloo", "grpo_passk", "grpo_vectorized", "opo", "gpg", "optimal_token_baseline"}
)


class VerlConfigError(ValueError):
    """The configuration cannot work; the message names the fields and the fix."""


class VerlConfig(BaseModel):
    """Settings of :class:`agl_verl.VERL`; unknown fields are rejected.

    Sizes follow verl's conventions: ``train_batch_size`` and ``ppo_mini_batch_size`` count *tasks*
    (prompts), each sampled ``rollout_n`` times; micro batches count samples per GPU.
    ``verl_overrides`` is merged last into the verl tree (dotted keys allowed), for anything not
    modelled here.
    """

    model_config = ConfigDict(extra="forbid")

    # model and hardware
    model_path: str = Field(min_length=1)
    n_gpus_per_node: int = Field(default=1, ge=1)
    nnodes: int = Field(default=1, ge=1)
    tensor_parallel_size: int = Field(default=1, ge=1)
    gpu_memory_utilization: float = Field(default=0.5, gt=0, le=1)
    # batch sizes and lengths
    train_batch_size: int = Field(default=8, ge=1)
    ppo_mini_batch_size: int = Field(default=8, ge=1)
    ppo_micro_batch_size_per_gpu: int = Field(default=2, ge=1)
    log_prob_micro_batch_size_per_gpu: int = Field(default=4, ge=1)
    rollout_n: int = Field(default=4, ge=1)
    max_prompt_length: int = 1024
    max_response_length: int = 512
    # optimisation
    lr: float = Field(default=1e-6, gt=0)
    adv_estimator: str = "grpo"
    norm_adv_by_std_in_grpo: bool = True
    use_kl_loss: bool = False
    kl_loss_coef: float = Field(default=0.001, ge=0)
    kl_loss_type: str = "low_var_kl"
    entropy_coeff: float = 0.0
    # sampling
    temperature: float = Field(default=1.0, gt=0)
    val_temperature: float = Field(default=0.0, ge=0)
    val_n: int = Field(default=1, ge=1)
    # rollouts in the agl store
    rollout_timeout_s: float = Field(default=1200.0, gt=0)
    batch_timeout_s: float | None = Field(default=None, gt=0)
    """Seconds one batch's rollouts may take in total; None: ``rollout_timeout_s`` + 60."""
    failed_rollout_policy: Literal["drop", "zero_fill"] = "drop"
    reward_fillna_value: float = 0.0
    credit: Literal["per_call", "per_trajectory"] = "per_call"
    agent_match: str | None = None
    # trainer loop
    total_epochs: int = Field(default=1, ge=1)
    total_training_steps: int | None = Field(default=None, ge=1)
    test_freq: int = -1
    save_freq: int = -1
    val_before_train: bool = True
    project_name: str = "agl"
    experiment_name: str = "verl"
    logger: list[str] = Field(default_factory=lambda: ["console"])
    default_local_dir: str = "checkpoints/agl-verl"
    """Where ``save_freq`` writes ``global_step_<n>/`` (actor model, optimizer, dataloader position)."""
    resume_mode: Literal["auto", "disable", "resume_path"] = "auto"
    """verl's: ``auto`` resumes from the latest checkpoint in ``default_local_dir`` (if any), ``resume_path``
    from ``resume_from_path``; the step counter, weights, optimizer and dataloader position continue."""
    resume_from_path: str | None = None
    rollout_data_dir: str | None = None
    """verl's: when set, every step writes ``<step>.jsonl`` there, one line per sample (ids, reward,
    advantage, the sampler's and the actor's log-probs)."""
    verl_overrides: dict[str, Any] = Field(default_factory=dict)
    cpu_platform: bool = False
    """Run verl on the CPU (for tests and laptops; tiny models only): :mod:`agl_verl.cpu_platform`,
    gloo, fp32 FSDP2, eager vLLM-CPU, Ray with one fake GPU. Needs vLLM's CPU build (``make test-verl``)."""

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self.check()

    def check(self) -> None:
        """Raise :class:`VerlConfigError` listing every impossible combination (run by the constructor).

        Field-level problems (a wrong type, an unknown field) raise pydantic's ``ValidationError`` first.
        """
        problems: list[str] = []
        if self.max_prompt_length <= 0:
            problems.append(f"max_prompt_length must be > 0 (got {self.max_prompt_length}).")
        if self.max_response_length <= 0:
            problems.append(
                f"max_response_length must be > 0 (got {self.max_response_length}); the model needs room "
                "to answer."
            )
        if self.train_batch_size % self.ppo_mini_batch_size:
            problems.append(
                f"train_batch_size ({self.train_batch_size}) is not divisible by ppo_mini_batch_size "
                f"({self.ppo_mini_batch_size}); pick a mini-batch size that divides the batch."
            )
        if self.ppo_mini_batch_size > self.train_batch_size:
            problems.append(
                f"ppo_mini_batch_size ({self.ppo_mini_batch_size}) exceeds train_batch_size "
                f"({self.train_batch_size})."
            )
        world = self.n_gpus_per_node * self.nnodes
        if world % self.tensor_parallel_size:
            problems.append(
                f"the GPU count ({self.n_gpus_per_node} per node x {self.nnodes} nodes = {world}) is not "
                f"divisible by tensor_parallel_size ({self.tensor_parallel_size})."
            )
        if self.tensor_parallel_size > self.n_gpus_per_node:
            problems.append(
                f"tensor_parallel_size ({self.tensor_parallel_size}) exceeds n_gpus_per_node "
                f"({self.n_gpus_per_node}); a vLLM replica must fit on one node."
            )
        samples_per_mini = self.ppo_mini_batch_size * self.rollout_n
        if samples_per_mini % world:
            problems.append(
                f"ppo_mini_batch_size x rollout_n ({samples_per_mini} samples) does not split evenly over "
                f"{world} GPUs."
            )
        elif (samples_per_mini // world) % self.ppo_micro_batch_size_per_gpu:
            problems.append(
                f"each GPU's mini-batch ({samples_per_mini // world} samples) is not divisible by "
                f"ppo_micro_batch_size_per_gpu ({self.ppo_micro_batch_size_per_gpu})."
            )
        if self.adv_estimator in GROUP_ESTIMATORS and self.rollout_n < 2:
            problems.append(
                f"adv_estimator={self.adv_estimator!r} normalises within a group of samples of one task, so "
                f"rollout_n must be >= 2 (got {self.rollout_n})."
            )
        if self.adv_estimator == "gae":
            problems.append(
                "adv_estimator='gae' needs a critic model, which agl-verl does not configure; use a "
                "critic-free estimator such as 'grpo' or 'rloo'."
            )
        if self.resume_mode == "resume_path" and "global_step_" not in (self.resume_from_path or ""):
            problems.append(
                f"resume_mode='resume_path' needs resume_from_path naming a checkpoint folder "
                f"(.../global_step_<n>), got {self.resume_from_path!r}."
            )
        if self.cpu_platform and self.world_size != 1:
            problems.append(
                f"cpu_platform=True runs one trainer and one vLLM process (got {world} GPUs); set "
                "n_gpus_per_node=1 and nnodes=1."
            )
        if self.cpu_platform and self.use_kl_loss:
            problems.append(
                "cpu_platform=True has no reference model (verl's reference engine pins CPU-offloaded "
                "memory, which needs an accelerator); set use_kl_loss=False."
            )
        if problems:
            raise VerlConfigError("Invalid agl-verl configuration:\n- " + "\n- ".join(problems))

    @property
    def effective_batch_timeout_s(self) -> float:
        """The bound on waiting for one batch (``batch_timeout_s``, or ``rollout_timeout_s`` + 60)."""
        return self.batch_timeout_s if self.batch_timeout_s is not None else self.rollout_timeout_s + 60.0

    @property
    def world_size(self) -> int:
        """GPUs in the Ray cluster the trainer uses."""
        return self.n_gpus_per_node * self.nnodes

    def to_verl_config(self) -> dict[str, Any]:
        """The settings as a nested dict of verl's config tree (``data``, ``actor_rollout_ref``, ...).

        Merge it over verl's ``ppo_trainer`` defaults (:func:`agl_verl.algorithm.compose_verl_config`).
        """
        tree: dict[str, Any] = {
            "data": {
                "train_batch_size": self.train_batch_size,
                "max_prompt_length": self.max_prompt_length,
                "max_response_length": self.max_response_length,
                "filter_overlong_prompts": False,
            },
            "actor_rollout_ref": {
                "model": {"path": self.model_path},
                "actor": {
                    "optim": {"lr": self.lr},
                    "ppo_mini_batch_size": self.ppo_mini_batch_size,
                    "ppo_micro_batch_size_per_gpu": self.ppo_micro_batch_size_per_gpu,
                    "use_kl_loss": self.use_kl_loss,
                    "kl_loss_coef": self.kl_loss_coef,
                    "kl_loss_type": self.kl_loss_type,
                    "entropy_coeff": self.entropy_coeff,
                },
                "rollout": {
                    "name": "vllm",
                    "mode": "async",
                    "n": self.rollout_n,
                    "temperature": self.temperature,
                    "tensor_model_parallel_size": self.tensor_parallel_size,
                    "gpu_memory_utilization": self.gpu_memory_utilization,
                    "log_prob_micro_batch_size_per_gpu": self.log_prob_micro_batch_size_per_gpu,
                    "prompt_length": self.max_prompt_length,
                    "response_length": self.max_response_length,
                    "val_kwargs": {
                        "temperature": self.val_temperature,
                        "n": self.val_n,
                        "do_sample": self.val_temperature > 0,
                    },
                },
                "ref": {"log_prob_micro_batch_size_per_gpu": self.log_prob_micro_batch_size_per_gpu},
            },
            "algorithm": {
                "adv_estimator": self.adv_estimator,
                "norm_adv_by_std_in_grpo": self.norm_adv_by_std_in_grpo,
                "use_kl_in_reward": False,
            },
            "trainer": {
                "n_gpus_per_node": self.n_gpus_per_node,
                "nnodes": self.nnodes,
                "total_epochs": self.total_epochs,
                "total_training_steps": self.total_training_steps,
                "test_freq": self.test_freq,
                "save_freq": self.save_freq,
                "val_before_train": self.val_before_train,
                "project_name": self.project_name,
                "experiment_name": self.experiment_name,
                "logger": list(self.logger),
                "default_local_dir": self.default_local_dir,
                "resume_mode": self.resume_mode,
                "resume_from_path": self.resume_from_path,
                "rollout_data_dir": self.rollout_data_dir,
                "critic_warmup": 0,
            },
        }
        for dotted, value in self.verl_overrides.items():
            _set_dotted(tree, dotted, value)
        return tree


CPU_PLATFORM_MODULE = "agl_verl.cpu_platform"
"""The module verl imports through ``VERL_USE_EXTERNAL_MODULES`` on a CPU run."""


def cpu_environment() -> dict[str, str]:
    """Environment variables of a CPU run (driver and Ray workers; ``cpu_platform=True``).

    verl's platform hook (``VERL_USE_EXTERNAL_MODULES``, ``VERL_PLATFORM``); the FSDP engine is
    registered for "cuda" only (``VERL_ENGINE_DEVICE``); vLLM's CPU build is selected explicitly
    (``VLLM_TARGET_DEVICE``) and gets 1 GiB of KV cache unless ``VLLM_CPU_KVCACHE_SPACE`` says otherwise.
    """
    return {
        "VERL_USE_EXTERNAL_MODULES": CPU_PLATFORM_MODULE,
        "VERL_PLATFORM": "cpu",
        "VERL_ENGINE_DEVICE": "cuda",
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
        "TOKENIZERS_PARALLELISM": "false",
        "WANDB_MODE": os.environ.get("WANDB_MODE", "disabled"),
    }


def cpu_verl_tree() -> dict[str, Any]:
    """verl settings of a CPU run (``cpu_platform=True``), merged over verl's defaults before ours.

    FSDP2 (FSDP1 fails on CPU), fp32 mixed precision (bf16 is emulated on CPUs without AVX512-BF16 and
    made the update >10x slower), no torch.compile, SDPA attention, eager vLLM without sleep mode, one
    worker per helper role, and Ray told about one fake GPU (verl's resource pools always ask for one;
    with only the real CPU count Ray's six helper actors would not fit).
    """
    fp32 = {"param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
    return {
        "data": {"dataloader_num_workers": 0},
        "actor_rollout_ref": {
            "model": {
                "override_config": {"attn_implementation": "sdpa"},
                "use_remove_padding": False,
                "enable_gradient_checkpointing": False,
            },
            "actor": {
                "strategy": "fsdp2",
                "use_torch_compile": False,
                "fsdp_config": {"strategy": "fsdp2", "mixed_precision": fp32},
            },
            "ref": {"strategy": "fsdp2", "use_torch_compile": False, "fsdp_config": {"strategy": "fsdp2"}},
            "rollout": {
                "enforce_eager": True,
                "free_cache_engine": False,
                "enable_sleep_mode": False,
                "agent": {"num_workers": 1},
            },
        },
        "reward": {"num_workers": 1},
        "transfer_queue": {"backend": {"SimpleStorage": {"num_data_storage_units": 1}}},
        "trainer": {"device": "cpu"},
        "ray_kwargs": {"ray_init": {"num_cpus": 32, "num_gpus": 1, "include_dashboard": False}},
    }


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``tree["a"]["b"] = value`` for ``"a.b"``, creating intermediate dicts."""
    *parents, leaf = dotted.split(".")
    node = tree
    for key in parents:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    if isinstance(value, dict) and isinstance(node.get(leaf), dict):
        for key, item in value.items():
            _set_dotted(node[leaf], key, item)
    else:
        node[leaf] = value
