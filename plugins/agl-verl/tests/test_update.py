"""verl config tree with agl settings merged, samples as verl V1 TransferQueue rows, V1 GRPO, VERL."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from omegaconf.errors import ConfigKeyError
from verl import DataProto
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

from agl_verl import VERL, VerlConfig, VerlConfigError
from agl_verl.data import to_transfer_queue
from agl_verl.samples import Sample
from agl_verl.update import compose_verl_config


def test_settings_land_in_verls_own_config_tree() -> None:
    config = VerlConfig(
        model_path="/models/tiny",
        rollout_n=3,
        train_batch_size=4,
        ppo_mini_batch_size=2,
        n_gpus_per_node=2,
        ppo_micro_batch_size_per_gpu=1,
    )
    tree = compose_verl_config(config)
    assert tree.actor_rollout_ref.model.path == "/models/tiny"
    assert tree.actor_rollout_ref.rollout.n == 3
    assert tree.actor_rollout_ref.rollout.name == "vllm"
    assert tree.actor_rollout_ref.rollout.val_kwargs.temperature == 0.0
    assert tree.algorithm.adv_estimator == "grpo"
    assert (
        tree.trainer.n_gpus_per_node == 2
        and tree.trainer.use_v1 is True
        and tree.trainer.v1.trainer_mode == "sync"
    )
    assert tree.transfer_queue.enable is True
    assert "critic" in tree and "reward" in tree  # verl's own sections are kept


def test_a_misspelled_override_is_caught_by_verls_schema() -> None:
    config = VerlConfig(model_path="m", verl_overrides={"actor_rollout_ref.actor.clip_ratioo": 0.2})
    with pytest.raises(ConfigKeyError, match="clip_ratioo"):
        compose_verl_config(config)


def _sample(uid: str, rollout: str, reward: float, prompt_len: int = 3, response: int = 2) -> Sample:
    ids = list(range(1, prompt_len + 1))
    return Sample(ids, [7] * response, [1] * response, reward, uid, rollout, 0, response_logprobs=[-0.5])


def test_samples_become_verls_transfer_queue_rows_one_session_per_rollout() -> None:
    samples = [
        _sample("a", "r1", 1.0),  # rollout r1: two calls, two samples
        _sample("a", "r1", 1.0, prompt_len=5, response=3),
        _sample("a", "r2", 0.0),
        _sample("b", "r3", 0.5, prompt_len=9),  # prompt over max_prompt_length: left out
        _sample("b", "r4", 0.5, response=6),  # response cut to 4
    ]
    rows = to_transfer_queue(samples, step=3, max_prompt_length=8, max_response_length=4)
    assert rows.keys == ["a_0_0", "a_0_1", "a_1_0", "b_0_0"]
    assert rows.metrics == {
        "agl/n_dropped_long_prompts": 1.0,
        "agl/n_truncated_responses": 1.0,
        "agl/mean_response_length": (2 + 3 + 2 + 4) / 4,
    }
    second = rows.fields[1]
    assert second["input_ids"].tolist() == [1, 2, 3, 4, 5, 7, 7, 7]
    assert second["position_ids"].tolist() == list(range(8))
    assert second["rm_scores"].tolist() == [0.0, 0.0, 1.0]  # the reward on the last response token
    assert math.isnan(second["rollout_log_probs"][1]) and second["rollout_log_probs"][0] == -0.5
    assert torch.equal(second["loss_mask"], second["response_mask"])
    assert rows.fields[3]["responses"].tolist() == [7] * 4 and rows.samples[3].response_ids == [7] * 4
    assert rows.tags[1] == {
        "status": "success",
        "prompt_len": 5,
        "response_len": 3,
        "seq_len": 8,
        "global_steps": 3,
        "min_global_steps": 2,
        "max_global_steps": 2,
    }
    td = list_of_dict_to_tensordict(rows.fields)  # what goes into TransferQueue
    assert td["input_ids"].is_nested and td["input_ids"].offsets().tolist() == [0, 5, 13, 18, 25]


def test_verls_v1_grpo_counts_each_rollout_once_and_gives_all_its_samples_the_advantage() -> None:
    samples = [
        _sample("a", "r1", 1.0),
        _sample("a", "r1", 1.0),
        _sample("a", "r2", 0.0),
        _sample("b", "r3", 1.0),
        _sample("b", "r4", 0.5),
    ]
    rows = to_transfer_queue(samples, step=1, max_prompt_length=8, max_response_length=8)
    mask = torch.stack([f["response_mask"] for f in rows.fields])
    scores = torch.stack([f["rm_scores"] for f in rows.fields])
    data = DataProto.from_dict(
        tensors={"response_mask": mask, "token_level_rewards": scores},
        non_tensors={"uid": np.array([f["uid"] for f in rows.fields], dtype=object)},
    )
    out = compute_advantage_for_multi_trajectories(
        data, batch_keys=rows.keys, adv_estimator="grpo", num_repeat=2
    )
    per_sample = out.batch["advantages"][:, 0].tolist()
    up = 0.5 / torch.tensor([1.0, 0.0]).std().item()
    down = 0.25 / torch.tensor([1.0, 0.5]).std().item()
    assert per_sample == pytest.approx([up, up, -up, down, -down], rel=1e-4)


def test_verl_algorithm_checks_its_config_and_input_before_starting_anything() -> None:
    with pytest.raises(VerlConfigError, match="rollout_n must be >= 2"):
        VERL({"model_path": "m", "rollout_n": 1})
    algorithm = VERL({"model_path": "m"})
    assert algorithm.config.rollout_n == 4 and algorithm.is_async()


async def test_run_without_tasks_fails_clearly() -> None:
    with pytest.raises(ValueError, match="non-empty train_dataset"):
        await VERL(VerlConfig(model_path="m")).run([])
    with pytest.raises(ValueError, match=r"fewer than train_batch_size \(8\)"):
        await VERL(VerlConfig(model_path="m")).run([{"q": 1}] * 3)
