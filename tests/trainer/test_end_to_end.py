"""The whole loop, both strategies: Baseline, 4 runners, a real openai client against the fake server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agl_core.algorithm import Baseline
from agl_core.emitter import find_final_reward
from agl_core.semconv import GEN_AI_OPERATION_NAME
from agl_core.store.memory import InMemoryLightningStore
from agl_core.trainer import Trainer
from agl_core.types import LLM, Triplet
from agl_testing.fake_openai import FakeOpenAIServer
from tests.trainer._helpers import qa_agent, run

QUESTIONS = [{"question": f"what is {i} plus {i}"} for i in range(200)]
STRATEGIES: dict[str, Any] = {
    "shm": {"type": "shm", "main_thread": "algorithm"},
    "cs": {"type": "cs", "graceful_timeout": 5.0},
}


@pytest.fixture(scope="module")
def llm_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(token_ids="always") as server:
        yield server


def make_trainer(strategy: str, llm_server: FakeOpenAIServer, store: InMemoryLightningStore) -> Trainer:
    return Trainer(
        n_runners=4,
        strategy=STRATEGIES[strategy],
        port=0,
        store=store,
        algorithm=Baseline(max_queue_length=16, polling_interval=0.5, span_verbosity="none"),
        initial_resources={"llm": LLM(endpoint=llm_server.base_url, model="policy")},
        progress=False,
    )


async def rollout_spans(store: InMemoryLightningStore, rollout_id: str) -> list[Any]:
    return list(await store.query_spans(rollout_id, "latest"))


@pytest.mark.parametrize("strategy", ["shm", "cs"])
def test_fit_with_4_runners_runs_200_rollouts_that_all_succeed_with_spans_rewards_and_triplets(
    strategy: str, llm_server: FakeOpenAIServer
) -> None:
    store = InMemoryLightningStore()
    trainer = make_trainer(strategy, llm_server, store)

    trainer.fit(qa_agent, QUESTIONS)

    rollouts = list(run(store.query_rollouts()))
    assert len(rollouts) == 200
    assert {r.status for r in rollouts} == {"succeeded"}
    workers = {w.worker_id for w in run(store.query_workers())}
    assert workers == {"Worker-0", "Worker-1", "Worker-2", "Worker-3"}
    used = {r.attempt.worker_id for r in rollouts}  # type: ignore[union-attr]
    assert len(used) >= 2 and used <= workers
    questions = {r.rollout_id: r.input["question"] for r in rollouts}
    for rollout in rollouts:
        spans = run(rollout_spans(store, rollout.rollout_id))
        assert any(GEN_AI_OPERATION_NAME in s.attributes for s in spans), "the LLM call was not traced"
        assert find_final_reward(spans) == 1.0
        triplets = trainer.adapter(spans)
        assert len(triplets) == 1
        triplet = triplets[0]
        assert isinstance(triplet, Triplet)
        assert triplet.reward == 1.0
        assert triplet.prompt["token_ids"], "prompt token ids missing"
        assert triplet.response["token_ids"] == llm_server.tokenizer.encode(questions[rollout.rollout_id])


@pytest.mark.parametrize("strategy", ["shm", "cs"])
def test_dev_checks_the_agent_with_baseline_on_the_same_trainer(
    strategy: str, llm_server: FakeOpenAIServer
) -> None:
    store = InMemoryLightningStore()
    trainer = Trainer(
        n_runners=2,
        strategy=STRATEGIES[strategy],
        port=0,
        store=store,
        initial_resources={"llm": LLM(endpoint=llm_server.base_url, model="policy")},
        progress=False,
    )
    trainer.dev(qa_agent, QUESTIONS[:6], val_dataset=QUESTIONS[6:8])
    trainer.dev(qa_agent, QUESTIONS[8:10])  # a second run reuses the trainer's components

    rollouts = list(run(store.query_rollouts()))
    assert sorted(r.mode for r in rollouts) == ["train"] * 8 + ["val"] * 2
    assert {r.status for r in rollouts} == {"succeeded"}
