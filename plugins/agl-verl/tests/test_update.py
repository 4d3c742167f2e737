"""verl config tree with agl settings merged, advantages via verl compute_advantage, the VERL entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from omegaconf.errors import ConfigKeyError

from agl_verl import VERL, VerlConfig, VerlConfigError
from agl_verl.data import build_data_proto, write_samples
from agl_verl.samples import Sample
from agl_verl.update import compose_verl_config, prepare_for_update


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
    assert tree.trainer.n_gpus_per_node == 2 and tree.trainer.use_v1 is False
    assert "critic" in tree and "reward" in tree  # verl's own sections are kept


def test_a_misspelled_override_is_caught_by_verls_schema() -> None:
    config = VerlConfig(model_path="m", verl_overrides={"actor_rollout_ref.actor.clip_ratioo": 0.2})
    with pytest.raises(ConfigKeyError, match="clip_ratioo"):
        compose_verl_config(config)


def _sample(uid: str, reward: float, prompt_len: int = 3, response: int = 2) -> Sample:
    return Sample(list(range(1, prompt_len + 1)), [7] * response, [1] * response, reward, uid, f"r-{uid}", 0)


def test_prepare_for_update_drops_long_prompts_and_computes_grpo() -> None:
    config = VerlConfig(
        model_path="m", rollout_n=2, train_batch_size=2, ppo_mini_batch_size=1, max_prompt_length=4
    )
    samples = [
        _sample("a", 1.0),
        _sample("a", 0.0),
        _sample("b", 1.0),
        _sample("b", 0.0),
        _sample("b", 0.5, prompt_len=9),
    ]
    batch, _ = build_data_proto(samples, pad_token_id=0, max_prompt_length=4, max_response_length=4)
    batch, metrics = prepare_for_update(batch, config)
    assert metrics["agl/n_dropped_long_prompts"] == 1
    assert len(batch) == 4 and metrics["agl/n_padding_samples"] == 0 and metrics["agl/skipped_update"] == 0
    per_sample = batch.batch["advantages"][:, 1]  # last response token
    expected = 0.5 / torch.tensor([1.0, 0.0]).std().item()
    assert per_sample.tolist() == pytest.approx([expected, -expected] * 2, rel=1e-4)
    assert torch.equal(batch.batch["token_level_rewards"], batch.batch["token_level_scores"])


def test_prepare_for_update_pads_to_whole_minibatches_with_rows_that_add_nothing_to_the_loss() -> None:
    # 3 samples (an agent's calls, not a multiple of the mini-batch) and mini-batches of 2 x 2 = 4
    config = VerlConfig(model_path="m", rollout_n=2, train_batch_size=2, ppo_mini_batch_size=2)
    samples = [_sample("a", 1.0), _sample("a", 0.0), _sample("b", 1.0)]
    batch, _ = build_data_proto(samples, pad_token_id=0, max_prompt_length=8, max_response_length=8)
    batch, metrics = prepare_for_update(batch, config)
    assert len(batch) == 4 and metrics["agl/n_padding_samples"] == 1 and metrics["agl/skipped_update"] == 0
    real, pad = batch.batch["response_mask"][:3], batch.batch["response_mask"][3]
    assert real.sum() == 6 and pad.sum() == 0
    assert batch.batch["advantages"][3].abs().sum() == 0
    assert batch.batch["input_ids"][3].tolist() == batch.batch["input_ids"][0].tolist()
    assert batch.non_tensor_batch["uid"].tolist() == ["a", "a", "b", "a"]


def test_rollout_data_dir_lines_hold_each_real_sample_unpadded(tmp_path: Path) -> None:
    config = VerlConfig(model_path="m", rollout_n=2, train_batch_size=2, ppo_mini_batch_size=2)
    samples = [_sample("a", 1.0, prompt_len=2), _sample("a", 0.0), _sample("b", 1.0, response=1)]
    batch, _ = build_data_proto(samples, pad_token_id=0, max_prompt_length=8, max_response_length=8)
    rollout_lp = batch.batch.pop("agl_rollout_log_probs")
    batch, _ = prepare_for_update(batch, config)  # one padding row, left out of the file
    batch.batch["old_log_probs"] = torch.full(batch.batch["responses"].shape, -0.5)
    path = tmp_path / "1.jsonl"
    assert write_samples(batch, rollout_lp, path) == 3
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["prompt_ids"] for line in lines] == [[1, 2], [1, 2, 3], [1, 2, 3]]
    assert [line["response_ids"] for line in lines] == [[7, 7], [7, 7], [7]]
    assert [line["reward"] for line in lines] == [1.0, 0.0, 1.0]
    assert lines[0]["advantage"] > 0 > lines[1]["advantage"]
    assert lines[2]["rollout_log_probs"] == [None] and lines[2]["old_log_probs"] == [-0.5]
    assert [line["uid"] for line in lines] == ["a", "a", "b"]


def test_prepare_for_update_skips_a_batch_with_no_sample_left() -> None:
    config = VerlConfig(
        model_path="m", rollout_n=2, train_batch_size=2, ppo_mini_batch_size=1, max_prompt_length=4
    )
    batch, _ = build_data_proto(
        [_sample("a", 1.0, prompt_len=9)], pad_token_id=0, max_prompt_length=4, max_response_length=8
    )
    batch, metrics = prepare_for_update(batch, config)
    assert (
        len(batch) == 0 and metrics["agl/skipped_update"] == 1 and metrics["agl/n_dropped_long_prompts"] == 1
    )


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


def test_verls_actor_input_conversion_accepts_the_batch_and_strips_all_padding() -> None:
    from verl.workers.utils.padding import left_right_2_no_padding

    samples = [_sample("a", 1.0, prompt_len=3, response=2), _sample("a", 0.0, prompt_len=5, response=4)]
    batch, _ = build_data_proto(samples, pad_token_id=0, max_prompt_length=8, max_response_length=8)
    packed = left_right_2_no_padding(batch.to_tensordict())
    ids = packed["input_ids"]
    assert ids.offsets().tolist() == [0, 5, 14]
    assert ids.values().tolist() == [1, 2, 3, 7, 7, 1, 2, 3, 4, 5, 7, 7, 7, 7]
