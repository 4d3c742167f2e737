"""End to end on CPU with the local backend: the reward goes up, the trainer gets exactly the sampled
tokens, every call of a multi-turn rollout is trained, and a resumed run continues from its checkpoint."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
import torch

from agl_core.adapter import LlmProxyTraceToTriplet
from agl_core.store.memory import InMemoryLightningStore
from agl_tinker.local import LocalServiceClient

from .harness import TASKS, local_tinker, run_tinker, two_turn_agent

pytestmark = pytest.mark.slow


def _rows(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


async def _recorded_calls(store: InMemoryLightningStore) -> list[tuple[list[int], list[int]]]:
    adapter = LlmProxyTraceToTriplet()
    calls = []
    for rollout in await store.query_rollouts():
        spans = list(await store.query_spans(rollout.rollout_id, "latest"))
        calls += [(t.prompt["token_ids"], t.response["token_ids"]) for t in adapter.adapt(spans)]
    return calls


async def test_reward_rises_on_the_digits_task_and_training_uses_the_sampled_tokens(
    tiny_model: Path, tmp_path: Path
) -> None:
    service = LocalServiceClient(checkpoint_dir=tmp_path / "ckpt", record_history=True)
    algo = local_tinker(tiny_model, tmp_path / "run", n_steps=10, learning_rate=3e-3, service_client=service)
    store = InMemoryLightningStore()
    await run_tinker(algo, store, TASKS)

    rows = _rows(tmp_path / "run")
    assert [r["step"] for r in rows] == list(range(1, 11))
    first = statistics.fmean(r["reward_mean"] for r in rows[:3])
    last = statistics.fmean(r["reward_mean"] for r in rows[-3:])
    print(f"digits task: reward first 3 steps {first:.3f}, last 3 steps {last:.3f}")
    assert last > first + 0.3, rows
    assert all(r["failed"] == 0 and r["rollouts"] == 32 for r in rows)
    assert (tmp_path / "run" / "reward.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # What the trainer received == what the sampler produced == what the proxy recorded.
    sampled: dict[tuple[int, ...], list[list[float]]] = {}
    for prompt, out, lps in service.sample_history:  # the same tokens may be sampled at several steps
        sampled.setdefault(tuple(prompt + out), []).append(lps)
    recorded = {tuple(p + r) for p, r in await _recorded_calls(store)}
    trained = algo.training_client.history
    assert len(trained) == sum(r["datums"] for r in rows) > 0
    for datum in trained:
        tokens = tuple(datum.model_input.to_ints() + datum.loss_fn_inputs["target_tokens"].tolist()[-1:])
        assert tokens in sampled and tokens in recorded
        n = len(sampled[tokens][0])
        used = datum.loss_fn_inputs["logprobs"].tolist()[-n:]
        assert any(used == pytest.approx(lps, abs=1e-6) for lps in sampled[tokens])
        advantages = datum.loss_fn_inputs["advantages"].tolist()
        assert set(advantages[:-n]) <= {0.0} and len(set(advantages[-n:])) == 1 and advantages[-1] != 0.0


async def test_every_call_of_a_multi_turn_rollout_is_trained(tiny_model: Path, tmp_path: Path) -> None:
    service = LocalServiceClient(checkpoint_dir=tmp_path / "ckpt", record_history=True)
    algo = local_tinker(tiny_model, tmp_path / "run", n_steps=1, service_client=service)
    await run_tinker(algo, InMemoryLightningStore(), TASKS, agent=two_turn_agent)
    (row,) = _rows(tmp_path / "run")
    assert row["llm_calls"] == 2 * row["rollouts"]
    assert row["datums"] > 0 and row["datums"] % 2 == 0
    # Both calls of a rollout carry the rollout's advantage; the second call's prompt contains the first.
    trained = algo.training_client.history
    advantages = [d.loss_fn_inputs["advantages"].tolist()[-1] for d in trained]
    assert sorted(advantages[0::2]) == sorted(advantages[1::2])


async def test_a_resumed_run_continues_from_its_checkpoint(tiny_model: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = local_tinker(tiny_model, run_dir, n_steps=2, save_every=1, learning_rate=3e-3)
    await run_tinker(first, InMemoryLightningStore(), TASKS)
    checkpoint = first.latest_checkpoint()
    assert checkpoint is not None and checkpoint["step"] == 2
    trained = {n: p.detach().clone() for n, p in first.training_client.model.named_parameters()}

    # Resuming at the last step restores exactly the trained weights and trains nothing more.
    same = local_tinker(tiny_model, run_dir, n_steps=2, resume_from="latest")
    await run_tinker(same, InMemoryLightningStore(), TASKS)
    assert same.step == 2
    assert all(torch.equal(trained[n], p) for n, p in same.training_client.model.named_parameters())
    assert [r["step"] for r in _rows(run_dir)] == [1, 2]

    more = local_tinker(tiny_model, run_dir, n_steps=3, save_every=1, resume_from=checkpoint["path"])
    await run_tinker(more, InMemoryLightningStore(), TASKS)
    assert more.step == 3 and more.latest_checkpoint()["step"] == 3  # type: ignore[index]
    assert [r["step"] for r in _rows(run_dir)] == [1, 2, 3]


async def test_resume_without_a_checkpoint_names_the_problem(tiny_model: Path, tmp_path: Path) -> None:
    algo = local_tinker(tiny_model, tmp_path / "run", resume_from="latest")
    with pytest.raises(FileNotFoundError, match="lists no checkpoint"):
        await run_tinker(algo, InMemoryLightningStore(), TASKS)


def test_runs_under_the_trainer_by_registry_name(tiny_model: Path, tmp_path: Path) -> None:
    from agl_core.trainer import Trainer

    from .harness import digits_agent

    settings = {"model_name": str(tiny_model), "backend": "local", "lora_rank": 0, "n_steps": 1}
    settings.update(max_tokens=6, group_size=4, batch_size=2, run_dir=str(tmp_path / "run"), progress=False)
    trainer = Trainer(n_runners=2, algorithm={"type": "tinker", **settings}, progress=False)
    trainer.fit(digits_agent, TASKS)
    (row,) = _rows(tmp_path / "run")
    assert row["rollouts"] == row["llm_calls"] == 8 and row["failed"] == 0
