"""Several agents traced at once in one process never mix spans (quirk 10 in
docs/migrating-from-agent-lightning.md, fixed)."""

from __future__ import annotations

import asyncio
import json
import threading

import openai

from agl_core.emitter import emit_message, emit_reward, find_final_reward, operation
from agl_core.semconv import GEN_AI_INPUT_MESSAGES, GEN_AI_OPERATION_NAME, LightningSpanAttributes
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer.otel import OtelTracer
from agl_core.types import Span
from agl_testing.fake_openai import FakeOpenAIServer
from tests.tracer._helpers import new_attempt

STEPS = 4


def agent_markers(spans: list[Span]) -> set[str]:
    """The agent name every span of a rollout carries (messages, prompts, operation inputs)."""
    markers: set[str] = set()
    for span in spans:
        attributes = span.attributes
        if GEN_AI_OPERATION_NAME in attributes:
            (message,) = json.loads(str(attributes[GEN_AI_INPUT_MESSAGES]))
            markers.add(message["parts"][0]["content"].split(":")[0])
        elif LightningSpanAttributes.MESSAGE_BODY.value in attributes:
            markers.add(str(attributes[LightningSpanAttributes.MESSAGE_BODY.value]).split(":")[0])
        elif "agentlightning.operation.input.agent" in attributes:
            markers.add(str(attributes["agentlightning.operation.input.agent"]))
        elif "agent" in attributes:
            markers.add(str(attributes["agent"]))
    return markers


def check_rollout(spans: list[Span], agent: str, reward: float) -> None:
    assert agent_markers(spans) == {agent}
    llm = [s for s in spans if GEN_AI_OPERATION_NAME in s.attributes]
    assert len(llm) == STEPS
    assert len([s for s in spans if s.name == "agentlightning.message"]) == STEPS
    assert find_final_reward(spans) == reward
    operations = {s.span_id for s in spans if s.name == "agentlightning.operation"}
    assert len(operations) == STEPS
    assert all(s.parent_id in operations for s in llm)  # LLM calls nest under their own agent's steps


@operation
def step_sync(agent: str, client: openai.OpenAI, i: int) -> str:
    emit_message(f"{agent}: step {i}")
    reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"{agent}: {i}"}])
    return reply.choices[0].message.content or ""


@operation
async def step_async(agent: str, client: openai.AsyncOpenAI, i: int) -> str:
    emit_message(f"{agent}: step {i}")
    await asyncio.sleep(0)  # let the other agent interleave
    reply = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"{agent}: {i}"}]
    )
    return reply.choices[0].message.content or ""


async def test_two_agents_as_asyncio_tasks_never_mix(
    tracer: OtelTracer, store: InMemoryLightningStore, llm_server: FakeOpenAIServer
) -> None:
    client = openai.AsyncOpenAI(api_key="test", base_url=llm_server.base_url)
    started: list[str] = []
    both_started = asyncio.Event()

    async def agent(name: str, reward: float) -> tuple[str, list[Span]]:
        rollout_id, attempt_id = await new_attempt(store)
        async with tracer.trace_context(name, rollout_id=rollout_id, attempt_id=attempt_id):
            started.append(name)
            if len(started) == 2:
                both_started.set()
            await asyncio.wait_for(both_started.wait(), 5)  # both rollouts are open before any step runs
            for i in range(STEPS):
                await step_async(name, client, i)
            emit_reward(reward, attributes={"agent": name})
        return rollout_id, tracer.get_last_trace()

    (rid_a, last_a), (rid_b, last_b) = await asyncio.gather(agent("alice", 1.0), agent("bob", 0.0))
    spans_a = list(await store.query_spans(rid_a))
    spans_b = list(await store.query_spans(rid_b))
    check_rollout(spans_a, "alice", 1.0)
    check_rollout(spans_b, "bob", 0.0)
    assert [s.span_id for s in last_a] == [s.span_id for s in spans_a]  # get_last_trace is per task
    assert [s.span_id for s in last_b] == [s.span_id for s in spans_b]


def test_two_agents_in_threads_never_mix(llm_server: FakeOpenAIServer) -> None:
    """Two runner threads, each with its own event loop and tracer, one shared store and LLM server."""
    store = InMemoryLightningStore()
    client = openai.OpenAI(api_key="test", base_url=llm_server.base_url)
    barrier = threading.Barrier(2, timeout=10)
    results: dict[str, tuple[str, list[Span]]] = {}
    errors: list[BaseException] = []

    def runner(name: str, reward: float, shared: OtelTracer | None) -> None:
        tracer = shared or OtelTracer()
        if shared is None:
            tracer.init_worker(0, store)

        async def main() -> None:
            rollout_id, attempt_id = await new_attempt(store)
            async with tracer.trace_context(name, rollout_id=rollout_id, attempt_id=attempt_id):
                for i in range(STEPS):
                    barrier.wait()  # force both agents to be mid-rollout at the same time
                    step_sync(name, client, i)
                emit_reward(reward, attributes={"agent": name})
            results[name] = (rollout_id, tracer.get_last_trace())

        try:
            asyncio.run(main())
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()
        finally:
            if shared is None:
                tracer.teardown_worker(0)

    shared = OtelTracer()
    shared.init_worker(0, store)
    try:
        for pair in ((None, None), (shared, shared)):  # separate tracers, then one tracer shared by threads
            results.clear()
            threads = [
                threading.Thread(target=runner, args=("alice", 1.0, pair[0])),
                threading.Thread(target=runner, args=("bob", 0.5, pair[1])),
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            assert not errors, errors
            for name, reward in (("alice", 1.0), ("bob", 0.5)):
                rollout_id, last = results[name]
                spans = asyncio.run(_query(store, rollout_id))
                check_rollout(spans, name, reward)
                assert [s.span_id for s in last] == [s.span_id for s in spans]
    finally:
        shared.teardown_worker(0)


async def _query(store: InMemoryLightningStore, rollout_id: str) -> list[Span]:
    return list(await store.query_spans(rollout_id))
