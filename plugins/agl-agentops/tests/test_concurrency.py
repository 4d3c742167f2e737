"""Rollouts traced at the same time (asyncio tasks, threads, two tracers) never mix their spans."""

from __future__ import annotations

import asyncio
import threading

import openai

from agl_agentops.tracer import AgentOpsTracer
from agl_core.emitter import emit_reward
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import Span
from agl_testing.fake_openai import FakeOpenAIServer

from .conftest import new_attempt

TURNS = 3


def check_rollout(spans: list[Span], rollout_id: str, attempt_id: str, label: str) -> None:
    """Every span is this rollout's, hangs under its own session span and says only its own words."""
    assert {(s.rollout_id, s.attempt_id) for s in spans} == {(rollout_id, attempt_id)}
    (session,) = [s for s in spans if s.name == f"{label}.session"]
    llm = [s for s in spans if s.name == "openai.chat.completion"]
    assert [s.attributes["gen_ai.prompt.0.content"] for s in llm] == [
        f"{label} turn {i}" for i in range(TURNS)
    ]
    assert {s.trace_id for s in spans} == {session.trace_id}
    assert all(s.parent_id == session.span_id for s in spans if s is not session)
    rewards = [s for s in spans if s.name == "agentlightning.annotation"]
    assert len(rewards) == TURNS


async def traced_rollout(
    tracer: AgentOpsTracer,
    store: InMemoryLightningStore,
    base_url: str,
    label: str,
    barrier: asyncio.Barrier | threading.Barrier,
) -> tuple[str, str]:
    client = openai.AsyncOpenAI(api_key="test", base_url=base_url)
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(label, rollout_id=rollout_id, attempt_id=attempt_id):
        for turn in range(TURNS):
            # Both rollouts are inside their trace context before either makes the next call.
            if isinstance(barrier, asyncio.Barrier):
                await barrier.wait()
            else:
                await asyncio.to_thread(barrier.wait, 10)
            await client.chat.completions.create(
                model="policy", messages=[{"role": "user", "content": f"{label} turn {turn}"}]
            )
            emit_reward(float(turn))
    return rollout_id, attempt_id


async def test_two_asyncio_tasks_do_not_mix_spans(
    tracer: AgentOpsTracer, store: InMemoryLightningStore
) -> None:
    barrier = asyncio.Barrier(2)
    with FakeOpenAIServer(token_ids="always", latency_s=0.02) as llm:
        (rid_a, aid_a), (rid_b, aid_b) = await asyncio.wait_for(
            asyncio.gather(
                traced_rollout(tracer, store, llm.base_url, "alpha", barrier),
                traced_rollout(tracer, store, llm.base_url, "beta", barrier),
            ),
            30,
        )
    check_rollout(list(await store.query_spans(rid_a)), rid_a, aid_a, "alpha")
    check_rollout(list(await store.query_spans(rid_b)), rid_b, aid_b, "beta")


def test_two_threads_do_not_mix_spans(tracer: AgentOpsTracer, store: InMemoryLightningStore) -> None:
    """One tracer shared by two runner threads, each with its own event loop."""
    barrier = threading.Barrier(2)
    results: dict[str, tuple[str, str]] = {}
    errors: list[BaseException] = []

    def worker(label: str) -> None:
        try:
            results[label] = asyncio.run(traced_rollout(tracer, store, llm.base_url, label, barrier))
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    with FakeOpenAIServer(token_ids="always", latency_s=0.02) as llm:
        threads = [threading.Thread(target=worker, args=(label,)) for label in ("alpha", "beta")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert not errors, errors
    spans = asyncio.run(_all_spans(store, [results["alpha"][0], results["beta"][0]]))
    check_rollout(spans[0], *results["alpha"], "alpha")
    check_rollout(spans[1], *results["beta"], "beta")


async def _all_spans(store: InMemoryLightningStore, rollout_ids: list[str]) -> list[list[Span]]:
    return [list(await store.query_spans(rollout_id)) for rollout_id in rollout_ids]


async def test_two_tracers_side_by_side_keep_their_own_spans(store: InMemoryLightningStore) -> None:
    first, second = AgentOpsTracer(), AgentOpsTracer()
    first.init_worker(0, store)
    second.init_worker(1, store)
    barrier = asyncio.Barrier(2)
    try:
        with FakeOpenAIServer(token_ids="always", latency_s=0.02) as llm:
            (rid_a, aid_a), (rid_b, aid_b) = await asyncio.wait_for(
                asyncio.gather(
                    traced_rollout(first, store, llm.base_url, "alpha", barrier),
                    traced_rollout(second, store, llm.base_url, "beta", barrier),
                ),
                30,
            )
    finally:
        first.teardown_worker(0)
        second.teardown_worker(1)
    check_rollout(list(await store.query_spans(rid_a)), rid_a, aid_a, "alpha")
    check_rollout(list(await store.query_spans(rid_b)), rid_b, aid_b, "beta")
    assert {s.span_id for s in first.get_last_trace()} == {s.span_id for s in await store.query_spans(rid_a)}
