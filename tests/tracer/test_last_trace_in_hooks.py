"""``get_last_trace()`` inside ``on_trace_end`` returns the current rollout's spans (0.3's behaviour)."""

from __future__ import annotations

import asyncio
from typing import Any

from agl_core.emitter import emit_message
from agl_core.litagent import rollout
from agl_core.runner import LitAgentRunner
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer.otel import OtelTracer
from agl_core.types import EnqueueRolloutRequest, Hook
from tests.tracer._helpers import new_attempt


class TraceAtEnd(Hook):
    """Records what ``tracer.get_last_trace()`` says in ``on_trace_end``."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, list[str]]] = []

    async def on_trace_end(self, *, agent: Any, runner: Any, tracer: Any, rollout: Any) -> None:
        spans = tracer.get_last_trace()
        bodies = [s.attributes.get("agentlightning.message.body") for s in spans]
        self.seen.append((rollout.rollout_id, bodies))
        assert {s.rollout_id for s in spans} <= {rollout.rollout_id}


async def test_get_last_trace_in_on_trace_end_is_the_current_rollout(store: InMemoryLightningStore) -> None:
    await store.add_resources({})

    @rollout
    def agent(task: str) -> float:
        emit_message(f"{task}-1")
        emit_message(f"{task}-2")
        return 1.0

    requests = [EnqueueRolloutRequest(input=t) for t in ("first", "second")]
    rollouts = await store.enqueue_many_rollouts(requests)
    hook = TraceAtEnd()
    runner: LitAgentRunner[Any] = LitAgentRunner(
        OtelTracer(instrument_llm_clients=False), heartbeat_interval=0, max_rollouts=2
    )
    with runner.run_context(agent=agent, store=store, hooks=[hook], worker_id=0):
        await asyncio.wait_for(runner.iter(), 30)
    assert hook.seen == [
        (rollouts[0].rollout_id, ["first-1", "first-2"]),
        (rollouts[1].rollout_id, ["second-1", "second-2"]),
    ]


async def test_inside_the_context_unsent_spans_have_provisional_ids(
    tracer: OtelTracer, store: InMemoryLightningStore
) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        assert tracer.get_last_trace() == []
        for i in range(3):
            emit_message(str(i))
        inside = tracer.get_last_trace()
        assert [s.attributes["agentlightning.message.body"] for s in inside] == ["0", "1", "2"]
        assert [s.sequence_id for s in inside] == sorted({s.sequence_id for s in inside})
    after = tracer.get_last_trace()
    assert [s.attributes["agentlightning.message.body"] for s in after] == ["0", "1", "2"]
    stored = await store.query_spans(rollout_id)
    assert [s.sequence_id for s in after] == [s.sequence_id for s in stored]
