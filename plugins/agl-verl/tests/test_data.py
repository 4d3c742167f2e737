"""Store spans → verl DataProto on multi-turn traces, the failure policy, and verl's GRPO advantage on it."""

from __future__ import annotations

import math

import pytest
import torch
from verl import DataProto
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, get_adv_estimator_fn

from agl_core.store.memory import InMemoryLightningStore
from agl_verl import VerlConfig
from agl_verl.data import BatchCollector, build_data_proto

from .traces import SYSTEM, TOOL_GLUE, Call, Script, multi_turn, run_scripted

PAD = 0
TASKS = [{"q": "add"}, {"q": "mul"}]
A_REWARDS = [1.0, 0.0, 1.0, 0.0]


def _script(task: dict[str, str], copy: int) -> Script:
    """Task "add": 2-turn tool-using agent, rewards 1,0,1,0. Task "mul": fail, hang, then 1.0 and 0.5."""
    if task["q"] == "add":
        calls = multi_turn([10, 11], [[20 + copy, 21, 2], [22, 2]], [[30, 31]])
        return Script(calls, reward=A_REWARDS[copy])
    calls = [Call([*SYSTEM, 12], [40 + copy, 41, 42, 2])]
    return [
        Script(calls, reward=1.0, status="failed"),
        Script(calls, reward=None, status="hang"),
        Script(calls, reward=1.0),
        Script(calls, reward=0.5),
    ][copy]


def _config(**fields: object) -> VerlConfig:
    return VerlConfig(
        model_path="tiny", train_batch_size=2, ppo_mini_batch_size=2, batch_timeout_s=0.5, **fields
    )  # type: ignore[arg-type]


async def _collect(
    config: VerlConfig,
) -> tuple[InMemoryLightningStore, list[str], DataProto, dict[str, float]]:
    store = InMemoryLightningStore()
    collector = BatchCollector(store, config)
    handles = await collector.enqueue(TASKS, mode="train", n=4)
    assert await run_scripted(store, _script) == 8
    batch = await collector.collect(handles, timeout=config.effective_batch_timeout_s)
    proto, metrics = build_data_proto(
        batch.samples,
        pad_token_id=PAD,
        max_prompt_length=config.max_prompt_length,
        max_response_length=config.max_response_length,
    )
    return store, [h.rollout_id for h in handles], proto, batch.metrics | metrics


async def test_enqueue_puts_n_copies_per_task_with_a_shared_group_uid() -> None:
    store = InMemoryLightningStore()
    handles = await BatchCollector(store, _config()).enqueue(TASKS, mode="val", n=3)
    assert [h.task_index for h in handles] == [0, 0, 0, 1, 1, 1]
    assert len({h.uid for h in handles[:3]}) == 1 and handles[0].uid != handles[3].uid
    rollout = await store.get_rollout_by_id(handles[4].rollout_id)
    assert rollout is not None and rollout.mode == "val" and rollout.input == {"q": "mul"}
    assert rollout.metadata == {"uid": handles[4].uid, "task_index": 1, "is_train": False}
    assert rollout.config.timeout_seconds == 1200.0


async def test_per_call_dataproto_from_store_spans_with_drop_policy() -> None:
    store, ids, proto, metrics = await _collect(_config())
    # 4 "add" rollouts x 2 calls + 2 surviving "mul" rollouts x 1 call; the failed and the hung one dropped.
    assert len(proto) == 10
    assert metrics["agl/n_rollouts"] == 8 and metrics["agl/n_succeeded"] == 6
    assert metrics["agl/n_failed"] == 1 and metrics["agl/n_timed_out"] == 1 and metrics["agl/n_dropped"] == 2
    hung = await store.get_rollout_by_id(ids[5])
    assert hung is not None and hung.status == "cancelled"

    b = proto.batch
    width_p, width_r = b["prompts"].shape[1], b["responses"].shape[1]
    assert b["input_ids"].shape == (10, width_p + width_r)
    assert torch.equal(b["input_ids"], torch.cat([b["prompts"], b["responses"]], dim=1))
    # Row 1 = second call of the first "add" rollout: the longest prompt, so no left padding.
    second_prompt = [*SYSTEM, 10, 11, 20, 21, 2, *TOOL_GLUE, 30, 31]
    assert b["prompts"][1].tolist() == second_prompt
    # Row 0 = first call: left-padded prompt, right-padded response.
    first_prompt = [*SYSTEM, 10, 11]
    pad = width_p - len(first_prompt)
    assert b["prompts"][0].tolist() == [PAD] * pad + first_prompt
    assert b["responses"][0].tolist() == [20, 21, 2] + [PAD] * (width_r - 3)
    assert b["attention_mask"][0].tolist() == [0] * pad + [1] * len(first_prompt) + [1] * 3 + [0] * (
        width_r - 3
    )
    assert b["position_ids"][0].tolist()[pad : pad + len(first_prompt) + 3] == list(
        range(len(first_prompt) + 3)
    )
    assert b["position_ids"][0].tolist()[:pad] == [0] * pad
    assert b["response_mask"][0].tolist() == [1, 1, 1] + [0] * (width_r - 3)
    # The reward sits on the last response token only.
    scores = b["token_level_scores"]
    assert scores[0].tolist() == [0.0, 0.0, 1.0] + [0.0] * (width_r - 3)
    assert scores.sum(dim=1).tolist() == [1, 1, 0, 0, 1, 1, 0, 0, 1.0, 0.5]
    uids = proto.non_tensor_batch["uid"]
    assert len(set(uids[:8])) == 1 and len(set(uids[8:])) == 1 and uids[0] != uids[8]
    assert list(proto.non_tensor_batch["turn_index"][:2]) == [0, 1]
    assert not b["is_drop_mask"].any()
    assert metrics["agl/reward"] == pytest.approx((1 + 0 + 1 + 0 + 1 + 0.5) / 6)


async def test_verl_grpo_advantage_on_the_collected_batch() -> None:
    _, _, proto, _ = await _collect(_config())
    b = proto.batch
    estimator = get_adv_estimator_fn("grpo")
    assert estimator is compute_grpo_outcome_advantage
    advantages, returns = estimator(
        token_level_rewards=b["token_level_scores"],
        response_mask=b["response_mask"],
        index=proto.non_tensor_batch["uid"],
    )
    assert advantages.shape == b["responses"].shape
    assert torch.equal(advantages, returns)
    per_sample = (advantages * b["response_mask"]).sum(dim=1) / b["response_mask"].sum(dim=1)
    # Group "add": rewards 1,1,0,0,1,1,0,0 -> mean 0.5, unbiased std sqrt(2/7).
    expected = 0.5 / math.sqrt(2 / 7)
    assert per_sample[:8].tolist() == pytest.approx([expected, expected, -expected, -expected] * 2, rel=1e-4)
    # Group "mul": rewards 1.0, 0.5 -> +-0.25 / std(1.0, 0.5).
    std = torch.tensor([1.0, 0.5]).std().item()
    assert per_sample[8:].tolist() == pytest.approx([0.25 / std, -0.25 / std], rel=1e-4)
    assert (advantages[b["response_mask"] == 0] == 0).all()


async def test_zero_fill_keeps_failed_and_timed_out_rollouts_with_reward_zero() -> None:
    _, _, proto, metrics = await _collect(_config(failed_rollout_policy="zero_fill"))
    assert len(proto) == 12
    assert metrics["agl/n_zero_filled"] == 2 and metrics["agl/n_dropped"] == 0
    mul_rewards = proto.batch["token_level_scores"].sum(dim=1)[8:].tolist()
    assert mul_rewards == [0.0, 0.0, 1.0, 0.5]  # the failed rollout's own reward (1.0) is not trusted


async def test_per_trajectory_credit_merges_each_rollout_into_one_sample() -> None:
    _, _, proto, metrics = await _collect(_config(credit="per_trajectory"))
    assert len(proto) == 6 and metrics["agl/n_trajectory_mismatches"] == 0
    b = proto.batch
    response = [20, 21, 2, *TOOL_GLUE, 30, 31, 22, 2]
    assert b["responses"][0].tolist()[: len(response)] == response
    assert b["response_mask"][0].tolist()[: len(response)] == [1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1]
    assert b["token_level_scores"][0].nonzero().flatten().tolist() == [len(response) - 1]


async def test_agent_match_keeps_only_the_selected_agents_calls() -> None:
    store = InMemoryLightningStore()
    collector = BatchCollector(store, _config(agent_match="^solver$"))
    handles = await collector.enqueue([{"q": "judge"}], mode="train", n=2)

    def script(task: object, copy: int) -> Script:
        solver = Call([*SYSTEM, 10], [20 + copy, 2], agent="solver")
        judge = Call([*SYSTEM, 90], [91, 2], agent="judge")
        return Script([solver, judge], reward=float(copy))

    await run_scripted(store, script)
    batch = await collector.collect(handles, timeout=0.5)
    assert [s.response_ids for s in batch.samples] == [[20, 2], [21, 2]]
    assert batch.metrics["agl/n_calls"] == 2


async def test_truncation_is_counted_and_marks_long_prompts_for_dropping() -> None:
    config = _config(max_prompt_length=8, max_response_length=2)
    _, _, proto, metrics = await _collect(config)
    b = proto.batch
    assert b["responses"].shape[1] == 2 and b["prompts"].shape[1] == 8
    # First "add" turns (3 tokens) and the "mul" answers (4 tokens) are cut; second "add" turns have 2.
    assert metrics["agl/n_truncated_responses"] == 6
    assert metrics["agl/n_truncated_prompts"] == 4  # the second "add" turns (16 prompt tokens)
    assert b["is_drop_mask"].tolist() == [False, True] * 4 + [False, False]
    assert b["token_level_scores"][0].tolist() == [0.0, 1.0]  # reward moved to the last kept token


async def test_a_batch_where_everything_failed_gives_metrics_then_a_clear_error() -> None:
    store = InMemoryLightningStore()
    collector = BatchCollector(store, _config())
    handles = await collector.enqueue(TASKS[1:], mode="train", n=2)
    await run_scripted(store, lambda task, copy: Script([], status="failed"))
    batch = await collector.collect(handles, timeout=0.5)
    assert batch.samples == [] and batch.metrics["agl/n_failed"] == 2
    with pytest.raises(ValueError, match="No training samples"):
        build_data_proto(batch.samples, pad_token_id=PAD, max_prompt_length=8, max_response_length=8)
