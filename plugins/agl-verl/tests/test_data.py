"""Store spans → verl V1 TransferQueue rows on multi-turn traces, the failure policy, credit, truncation."""

from __future__ import annotations

import pytest

from agl_core.store.memory import InMemoryLightningStore
from agl_verl import VerlConfig
from agl_verl.data import BatchCollector, TqBatch, to_transfer_queue

from .traces import SYSTEM, TOOL_GLUE, Call, Script, multi_turn, run_scripted

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


async def _collect(config: VerlConfig) -> tuple[InMemoryLightningStore, list[str], TqBatch, dict[str, float]]:
    store = InMemoryLightningStore()
    collector = BatchCollector(store, config)
    handles = await collector.enqueue(TASKS, mode="train", n=4)
    assert await run_scripted(store, _script) == 8
    batch = await collector.collect(handles, timeout=config.effective_batch_timeout_s)
    rows = to_transfer_queue(
        batch.samples,
        step=1,
        max_prompt_length=config.max_prompt_length,
        max_response_length=config.max_response_length,
    )
    return store, [h.rollout_id for h in handles], rows, batch.metrics | rows.metrics


async def test_enqueue_puts_n_copies_per_task_with_a_shared_group_uid() -> None:
    store = InMemoryLightningStore()
    handles = await BatchCollector(store, _config()).enqueue(TASKS, mode="val", n=3)
    assert [h.task_index for h in handles] == [0, 0, 0, 1, 1, 1]
    assert len({h.uid for h in handles[:3]}) == 1 and handles[0].uid != handles[3].uid
    rollout = await store.get_rollout_by_id(handles[4].rollout_id)
    assert rollout is not None and rollout.mode == "val" and rollout.input == {"q": "mul"}
    assert rollout.metadata == {"uid": handles[4].uid, "task_index": 1, "is_train": False}
    assert rollout.config.timeout_seconds == 1200.0


async def test_enqueue_takes_the_group_uids_it_is_given() -> None:
    store = InMemoryLightningStore()
    handles = await BatchCollector(store, _config()).enqueue(TASKS, mode="train", n=2, uids=["u1", "u2"])
    assert [h.uid for h in handles] == ["u1", "u1", "u2", "u2"]
    with pytest.raises(ValueError, match="1 uids for 2 tasks"):
        await BatchCollector(store, _config()).enqueue(TASKS, mode="train", n=2, uids=["u1"])


async def test_per_call_rows_from_store_spans_with_drop_policy() -> None:
    store, ids, rows, metrics = await _collect(_config())
    # 4 "add" rollouts x 2 calls + 2 surviving "mul" rollouts x 1 call; the failed and the hung one dropped.
    assert len(rows.keys) == 10
    assert metrics["agl/n_rollouts"] == 8 and metrics["agl/n_succeeded"] == 6
    assert metrics["agl/n_failed"] == 1 and metrics["agl/n_timed_out"] == 1 and metrics["agl/n_dropped"] == 2
    hung = await store.get_rollout_by_id(ids[5])
    assert hung is not None and hung.status == "cancelled"
    add, mul = rows.fields[0]["uid"], rows.fields[8]["uid"]
    assert add != mul
    # one session per rollout, one index per call: verl's {uid}_{session}_{index}
    assert rows.keys[:4] == [f"{add}_0_0", f"{add}_0_1", f"{add}_1_0", f"{add}_1_1"]
    assert rows.keys[8:] == [f"{mul}_0_0", f"{mul}_1_0"]
    first, second = rows.fields[0], rows.fields[1]
    assert first["prompts"].tolist() == [*SYSTEM, 10, 11] and first["responses"].tolist() == [20, 21, 2]
    assert second["prompts"].tolist() == [*SYSTEM, 10, 11, 20, 21, 2, *TOOL_GLUE, 30, 31]
    assert first["response_mask"].tolist() == [1, 1, 1]
    assert first["rm_scores"].tolist() == [0.0, 0.0, 1.0]  # the reward on the last response token only
    assert [f["rm_scores"].sum().item() for f in rows.fields] == [1, 1, 0, 0, 1, 1, 0, 0, 1.0, 0.5]
    assert [s.turn_index for s in rows.samples[:2]] == [0, 1]
    assert metrics["agl/reward"] == pytest.approx((1 + 0 + 1 + 0 + 1 + 0.5) / 6)


async def test_zero_fill_keeps_failed_and_timed_out_rollouts_with_reward_zero() -> None:
    _, _, rows, metrics = await _collect(_config(failed_rollout_policy="zero_fill"))
    assert len(rows.keys) == 12
    assert metrics["agl/n_zero_filled"] == 2 and metrics["agl/n_dropped"] == 0
    mul_rewards = [f["rm_scores"].sum().item() for f in rows.fields[8:]]
    assert mul_rewards == [0.0, 0.0, 1.0, 0.5]  # the failed rollout's own reward (1.0) is not trusted


async def test_per_trajectory_credit_merges_each_rollout_into_one_sample() -> None:
    _, _, rows, metrics = await _collect(_config(credit="per_trajectory"))
    assert len(rows.keys) == 6 and metrics["agl/n_trajectory_mismatches"] == 0
    assert all(key.endswith("_0") for key in rows.keys)  # one sample per rollout
    response = [20, 21, 2, *TOOL_GLUE, 30, 31, 22, 2]
    assert rows.fields[0]["responses"].tolist() == response
    assert rows.fields[0]["response_mask"].tolist() == [1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1]
    assert rows.fields[0]["rm_scores"].nonzero().flatten().tolist() == [len(response) - 1]
    assert rows.fields[0]["num_turns"] == 2


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


async def test_truncation_cuts_responses_and_leaves_out_long_prompts() -> None:
    config = _config(max_prompt_length=8, max_response_length=2)
    _, _, rows, metrics = await _collect(config)
    # First "add" turns (3 tokens) and the "mul" answers (4 tokens) are cut; second "add" turns have 2.
    assert metrics["agl/n_truncated_responses"] == 6
    assert metrics["agl/n_dropped_long_prompts"] == 4  # the second "add" turns (16 prompt tokens)
    assert len(rows.keys) == 6 and all(len(f["responses"]) == 2 for f in rows.fields)
    assert rows.fields[0]["rm_scores"].tolist() == [0.0, 1.0]  # reward moved to the last kept token


async def test_a_batch_where_everything_failed_gives_metrics_and_no_rows() -> None:
    store = InMemoryLightningStore()
    collector = BatchCollector(store, _config())
    handles = await collector.enqueue(TASKS[1:], mode="train", n=2)
    await run_scripted(store, lambda task, copy: Script([], status="failed"))
    batch = await collector.collect(handles, timeout=0.5)
    assert batch.samples == [] and batch.metrics["agl/n_failed"] == 2
    rows = to_transfer_queue(batch.samples, step=1, max_prompt_length=8, max_response_length=8)
    assert rows.keys == [] and rows.metrics["agl/mean_response_length"] == 0.0
