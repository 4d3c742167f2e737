"""OTEL_SDK_DISABLED=true (CrewAI's telemetry opt-out) does not silently switch agl's capture off."""

from __future__ import annotations

import logging

import openai
import pytest

from agl_core.adapter import TracerTraceToTriplet
from agl_core.emitter import emit_reward
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer import bridge
from agl_core.tracer.otel import OtelTracer
from agl_testing.fake_openai import FakeOpenAIServer
from tests.tracer._helpers import new_attempt


async def test_rollouts_are_still_captured_and_agl_says_why(
    store: InMemoryLightningStore,
    llm_server: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    monkeypatch.setattr(bridge, "_warned_disabled", False)
    tracer = OtelTracer(flush_timeout=10.0, global_provider=False)
    with caplog.at_level(logging.WARNING, logger="agl_core.tracer.bridge"):
        tracer.init_worker(0, store)
    try:
        assert any("OTEL_SDK_DISABLED=true" in r.getMessage() for r in caplog.records)
        rollout_id, attempt_id = await new_attempt(store)
        client = openai.AsyncOpenAI(base_url=llm_server.base_url, api_key="x")
        async with tracer.trace_context("agent", rollout_id=rollout_id, attempt_id=attempt_id):
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            emit_reward(1.0)
        await client.close()
    finally:
        tracer.teardown_worker(0)
    triplets = TracerTraceToTriplet().adapt(list(await store.query_spans(rollout_id)))
    assert len(triplets) == 1 and triplets[0].reward == 1.0
    assert triplets[0].response["token_ids"]
