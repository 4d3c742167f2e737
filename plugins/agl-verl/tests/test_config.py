"""Config defaults, the verl tree it maps to, and clear errors for impossible combinations."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agl_verl import VerlConfig, VerlConfigError


def test_one_gpu_defaults_are_valid_and_map_onto_verl_sections() -> None:
    config = VerlConfig(model_path="/models/tiny")
    tree = config.to_verl_config()
    assert set(tree) == {"data", "actor_rollout_ref", "algorithm", "trainer"}
    assert tree["actor_rollout_ref"]["model"]["path"] == "/models/tiny"
    assert tree["actor_rollout_ref"]["rollout"]["n"] == 4
    assert tree["actor_rollout_ref"]["rollout"]["mode"] == "async"
    assert tree["actor_rollout_ref"]["rollout"]["val_kwargs"] == {
        "temperature": 0.0,
        "n": 1,
        "do_sample": False,
    }
    assert tree["algorithm"]["adv_estimator"] == "grpo"
    assert tree["trainer"]["n_gpus_per_node"] == 1 and tree["trainer"]["nnodes"] == 1


def test_overrides_merge_into_the_tree_with_dotted_keys() -> None:
    config = VerlConfig(
        model_path="m",
        verl_overrides={
            "actor_rollout_ref.actor.clip_ratio": 0.3,
            "trainer": {"nnodes": 1, "resume_mode": "disable"},
        },
    )
    tree = config.to_verl_config()
    assert tree["actor_rollout_ref"]["actor"]["clip_ratio"] == 0.3
    assert tree["actor_rollout_ref"]["actor"]["optim"]["lr"] == 1e-6  # siblings kept
    assert tree["trainer"]["resume_mode"] == "disable"
    assert tree["trainer"]["n_gpus_per_node"] == 1


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        (
            {"train_batch_size": 6, "ppo_mini_batch_size": 4},
            "train_batch_size (6) is not divisible by ppo_mini_batch_size (4)",
        ),
        ({"n_gpus_per_node": 4, "tensor_parallel_size": 3}, "not divisible by tensor_parallel_size (3)"),
        ({"max_response_length": 0}, "max_response_length must be > 0"),
        ({"rollout_n": 1}, "rollout_n must be >= 2"),
        (
            {"n_gpus_per_node": 8, "train_batch_size": 2, "ppo_mini_batch_size": 2, "rollout_n": 3},
            "does not split evenly over 8 GPUs",
        ),
        ({"ppo_micro_batch_size_per_gpu": 3}, "not divisible by ppo_micro_batch_size_per_gpu (3)"),
        ({"adv_estimator": "gae"}, "needs a critic"),
        ({"resume_mode": "resume_path"}, "needs resume_from_path naming a checkpoint folder"),
    ],
)
def test_impossible_combinations_fail_with_the_reason(fields: dict[str, object], needle: str) -> None:
    with pytest.raises(VerlConfigError, match="Invalid agl-verl configuration") as info:
        VerlConfig(model_path="m", **fields)  # type: ignore[arg-type]
    assert needle in str(info.value)


def test_all_problems_are_reported_together() -> None:
    with pytest.raises(VerlConfigError) as info:
        VerlConfig(
            model_path="m", max_response_length=-1, rollout_n=1, train_batch_size=5, ppo_mini_batch_size=2
        )
    text = str(info.value)
    assert "max_response_length" in text and "rollout_n" in text and "train_batch_size (5)" in text


def test_rollout_n_one_is_fine_without_a_group_estimator() -> None:
    config = VerlConfig(model_path="m", rollout_n=1, adv_estimator="reinforce_plus_plus")
    assert config.to_verl_config()["actor_rollout_ref"]["rollout"]["n"] == 1


def test_unknown_fields_and_bad_policies_are_rejected() -> None:
    with pytest.raises(ValidationError, match="rollout_m"):
        VerlConfig(model_path="m", rollout_m=4)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="failed_rollout_policy"):
        VerlConfig(model_path="m", failed_rollout_policy="retry")  # type: ignore[arg-type]


def test_waiting_for_a_batch_is_always_bounded() -> None:
    assert VerlConfig(model_path="m", rollout_timeout_s=100).effective_batch_timeout_s == 160.0
    assert VerlConfig(model_path="m", batch_timeout_s=5).effective_batch_timeout_s == 5.0
