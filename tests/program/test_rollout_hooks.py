"""RolloutHooks: on_enqueue transforms requests, on_succeeded adds a reward before the rollout is finished,
on_failed sees final failures only -- on both strategies, with the program's calls through the proxy."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agl_core as agl
from agl_core.emitter import emit_reward, find_final_reward
from agl_core.llm_proxy import LLMProxy
from agl_core.program import HookedStore, ProgramAgent, RolloutHooks
from agl_core.program.rollout_hooks import with_rollout_hooks
from agl_core.store.base import LightningStore
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import EnqueueRolloutRequest, Rollout, RolloutConfig, Span
from agl_testing.fake_openai import FakeOpenAIServer

PROGRAM = str(Path(__file__).with_name("chat_program.py"))


@pytest.fixture(scope="module")
def backend() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(token_ids="always") as server:
        yield server


class GradeByCalls(RolloutHooks):
    """Tags every request and gives it two attempts; rewards a success by its number of recorded calls."""

    def __init__(self) -> None:
        self.failed: list[str] = []
        self.calls_seen: list[int] = []

    async def on_enqueue(self, request: EnqueueRolloutRequest) -> EnqueueRolloutRequest:
        config = RolloutConfig(max_attempts=2, retry_condition=["failed"])
        return request.model_copy(update={"metadata": {"tagged": True}, "config": config})

    async def on_succeeded(self, *, rollout: Rollout, attempt_id: str, store: LightningStore) -> None:
        spans = await store.query_spans(rollout.rollout_id, attempt_id)
        calls = [s for s in spans if s.name == "agl.llm_proxy.request"]
        self.calls_seen.append(len(calls))
        (sequence_id,) = await store.get_many_span_sequence_ids([(rollout.rollout_id, attempt_id)])
        core = emit_reward(0.5 + len(calls), propagate=False)
        await store.add_span(
            Span.from_core_fields(
                core, rollout_id=rollout.rollout_id, attempt_id=attempt_id, sequence_id=sequence_id
            )
        )

    async def on_failed(self, *, rollout: Rollout, store: LightningStore) -> None:
        self.failed.append(rollout.input["question"])


@pytest.mark.parametrize("strategy", ["shm", "cs"])
def test_rollout_hooks_transform_reward_and_see_final_failures(
    strategy: str, backend: FakeOpenAIServer
) -> None:
    hooks = GradeByCalls()
    store = InMemoryLightningStore()
    # the program exits 1 for the task marked "fail" (every attempt), and prints no reward otherwise
    script = (
        "import sys, openai; messages = [{'role': 'user', 'content': sys.argv[1]}]; "
        "openai.OpenAI(max_retries=0).chat.completions.create(model='policy', messages=messages); "
        "sys.exit(1 if sys.argv[1] == 'fail' else 0)"
    )
    agent = ProgramAgent([sys.executable, "-c", script, "{input.question}"])
    with LLMProxy({"policy": backend.base_url}, store=store) as proxy:
        trainer = agl.Trainer(
            strategy=strategy,
            n_runners=2,
            port=0,
            store=store,
            rollout_hooks=hooks,
            initial_resources={"llm": proxy.as_resource()},
            progress=False,
        )
        assert isinstance(trainer.store, HookedStore) and trainer.store.store is store
        trainer.dev(agent, [{"question": "ok one"}, {"question": "ok two"}, {"question": "fail"}])
    rollouts = {r.input["question"]: r for r in asyncio.run(store.query_rollouts())}
    assert {q: r.status for q, r in rollouts.items()} == {
        "ok one": "succeeded",
        "ok two": "succeeded",
        "fail": "failed",
    }
    assert all(r.metadata == {"tagged": True} for r in rollouts.values())
    assert len(asyncio.run(store.query_attempts(rollouts["fail"].rollout_id))) == 2  # the hook's retry policy
    assert hooks.failed == ["fail"]  # once, after the last attempt
    for question in ("ok one", "ok two"):
        spans = asyncio.run(store.query_spans(rollouts[question].rollout_id, "latest"))
        assert find_final_reward(spans) == 1.5  # one recorded call, rewarded before the success was stored
    assert hooks.calls_seen == [1, 1]


async def test_on_enqueue_must_return_a_request() -> None:
    class Broken(RolloutHooks):
        async def on_enqueue(self, request: EnqueueRolloutRequest) -> Any:
            return None

    store = with_rollout_hooks(InMemoryLightningStore(), Broken())
    with pytest.raises(TypeError, match="must return the"):
        await store.enqueue_rollout({"question": "x"})
    with pytest.raises(TypeError, match="RolloutHooks instances"):
        with_rollout_hooks(InMemoryLightningStore(), [object()])  # type: ignore[list-item]
