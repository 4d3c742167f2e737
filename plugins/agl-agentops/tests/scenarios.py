"""Scenarios that need a fresh process (AgentOps is a process singleton): ``python -m tests.scenarios NAME``.

Each prints one JSON line with what it observed. The AgentOps endpoint comes from the environment
(``AGENTOPS_API_ENDPOINT`` / ``AGENTOPS_EXPORTER_ENDPOINT``), served by the parent test.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

import openai

from agl_agentops.tracer import AgentOpsTracer
from agl_core.emitter import emit_reward
from agl_core.store.memory import InMemoryLightningStore
from agl_testing.fake_openai import FakeOpenAIServer


async def _rollout(tracer: AgentOpsTracer, store: InMemoryLightningStore, base_url: str) -> dict[str, Any]:
    client = openai.AsyncOpenAI(api_key="test", base_url=base_url, max_retries=0)
    attempted = await store.start_rollout(input={"task": "scenario"})
    started = time.monotonic()
    async with tracer.trace_context(
        "scenario", rollout_id=attempted.rollout_id, attempt_id=attempted.attempt.attempt_id
    ):
        await client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "hi"}])
        emit_reward(1.0)
    elapsed = time.monotonic() - started
    spans = await store.query_spans(attempted.rollout_id)
    return {
        "rollout_s": elapsed,
        "stored": sorted(s.name for s in spans),
        "token_ids": [
            bool(s.attributes.get("response_token_ids")) for s in spans if s.name.startswith("openai")
        ],
    }


async def managed_default() -> dict[str, Any]:
    """A key and endpoints in the environment, but sending not asked for: nothing may leave the process."""
    store = InMemoryLightningStore()
    tracer = AgentOpsTracer()
    tracer.init_worker(0, store)
    with FakeOpenAIServer(token_ids="always") as llm:
        result = await _rollout(tracer, store, llm.base_url)
    tracer.teardown_worker(0)
    return {**result, "mode": tracer.agentops_mode}


async def external() -> dict[str, Any]:
    """The application initializes AgentOps itself (with a key); agl attaches to it."""
    import agentops
    from opentelemetry import trace

    store = InMemoryLightningStore()
    before_init = ""
    try:
        AgentOpsTracer(agentops_managed=False).init_worker(0, store)
    except RuntimeError as exc:
        before_init = str(exc)
    agentops.init(
        api_key=os.environ["AGENTOPS_API_KEY"],
        endpoint=os.environ["AGENTOPS_API_ENDPOINT"],
        exporter_endpoint=os.environ["AGENTOPS_EXPORTER_ENDPOINT"],
        auto_start_session=False,
    )
    deadline = time.monotonic() + 10
    while agentops.get_client().get_current_jwt() is None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    tracer = AgentOpsTracer(agentops_managed=False)
    tracer.init_worker(0, store)
    with FakeOpenAIServer(token_ids="always") as llm:
        result = await _rollout(tracer, store, llm.base_url)
    tracer.teardown_worker(0)
    flushed = trace.get_tracer_provider().force_flush()  # the application's own provider and exporter
    return {**result, "mode": tracer.agentops_mode, "before_init": before_init, "flushed": flushed}


if __name__ == "__main__":
    scenario = {"managed_default": managed_default, "external": external}[sys.argv[1]]
    print(json.dumps(asyncio.run(scenario())))
