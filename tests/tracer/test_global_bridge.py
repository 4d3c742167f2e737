"""The global-provider bridge: spans other instrumentations make through ``trace.get_tracer`` reach agl."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agl_core.emitter import emit_reward
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer import bridge
from agl_core.tracer.otel import OtelTracer
from tests.tracer._helpers import new_attempt


@pytest.fixture
def fresh_global_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A process whose global tracer provider was never set (OpenTelemetry allows setting it once)."""
    from opentelemetry.util._once import Once

    monkeypatch.setattr(trace_api, "_TRACER_PROVIDER", None)
    monkeypatch.setattr(trace_api, "_TRACER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(bridge, "_installed", None)
    monkeypatch.setattr(bridge, "_mode", None)
    monkeypatch.setattr(bridge, "_attached", {})
    monkeypatch.delenv(bridge.GLOBAL_PROVIDER_ENV, raising=False)
    yield


def langgraph_style_agent(question: str, *, reward: bool = True) -> str:
    """An agent whose steps are spans made the way OpenInference/OpenLLMetry instrumentations make them."""
    otel = trace_api.get_tracer("langgraph.fake")
    with otel.start_as_current_span("LangGraph", attributes={"langchain.chain.type": "qa_agent"}):
        with otel.start_as_current_span("retrieve", attributes={"openinference.span.kind": "RETRIEVER"}):
            pass
        with otel.start_as_current_span("ChatOpenAI", attributes={"openinference.span.kind": "LLM"}):
            answer = question.upper()
        if reward:
            emit_reward(1.0)
    return answer


def names(spans: list[Any]) -> list[str]:
    return sorted(s.name for s in spans)


async def test_no_app_provider_agl_installs_one_and_takes_rollout_spans_only(
    fresh_global_provider: None, store: InMemoryLightningStore
) -> None:
    tracer = OtelTracer(instrument_llm_clients=False)
    tracer.init_worker(0, store)
    try:
        assert tracer.bridge_mode == "installed"
        assert isinstance(trace_api.get_tracer_provider(), TracerProvider)
        langgraph_style_agent("outside", reward=False)  # no rollout: not captured
        rollout_id, attempt_id = await new_attempt(store)
        async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
            langgraph_style_agent("inside")
        langgraph_style_agent("outside again", reward=False)
        spans = list(await store.query_spans(rollout_id))
    finally:
        tracer.teardown_worker(0)
    assert names(spans) == ["ChatOpenAI", "LangGraph", "agentlightning.annotation", "retrieve"]
    assert {(s.rollout_id, s.attempt_id) for s in spans} == {(rollout_id, attempt_id)}
    by_name = {s.name: s for s in spans}
    root = by_name["LangGraph"]
    assert by_name["ChatOpenAI"].parent_id == root.span_id
    assert by_name["agentlightning.annotation"].parent_id == root.span_id  # agl's span under the app's
    assert len(store_spans := await store.query_spans(rollout_id)) == 4 and store_spans
    # a second tracer in the same process does not install a second provider
    other = OtelTracer(instrument_llm_clients=False)
    other.init_worker(0, store)
    other.teardown_worker(0)
    assert other.bridge_mode == "installed"


async def test_app_provider_keeps_all_its_spans_and_agl_adds_its_processor(
    fresh_global_provider: None, store: InMemoryLightningStore
) -> None:
    exporter = InMemorySpanExporter()
    app_provider = TracerProvider()
    app_provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace_api.set_tracer_provider(app_provider)

    tracer = OtelTracer(instrument_llm_clients=False)
    tracer.init_worker(0, store)
    try:
        assert tracer.bridge_mode == "attached"
        assert trace_api.get_tracer_provider() is app_provider  # never replaced
        langgraph_style_agent("before", reward=False)
        rollout_id, attempt_id = await new_attempt(store)
        async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
            langgraph_style_agent("inside")
        langgraph_style_agent("after", reward=False)
    finally:
        tracer.teardown_worker(0)
    exported = exporter.get_finished_spans()
    assert [s.name for s in exported].count("LangGraph") == 3  # the app still gets every one of its spans
    assert len(exported) == 9  # 3 runs x 3 app spans (agl's reward span is on agl's own provider)
    stored = list(await store.query_spans(rollout_id))
    assert names(stored) == ["ChatOpenAI", "LangGraph", "agentlightning.annotation", "retrieve"]


async def test_opt_out_leaves_the_global_provider_alone(
    fresh_global_provider: None, store: InMemoryLightningStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(bridge.GLOBAL_PROVIDER_ENV, "0")
    tracer = OtelTracer(instrument_llm_clients=False)
    tracer.init_worker(0, store)
    try:
        assert tracer.bridge_mode == "disabled"
        assert isinstance(trace_api.get_tracer_provider(), trace_api.ProxyTracerProvider)
        rollout_id, attempt_id = await new_attempt(store)
        async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
            langgraph_style_agent("inside")
        assert names(list(await store.query_spans(rollout_id))) == ["agentlightning.annotation"]
    finally:
        tracer.teardown_worker(0)
    flagged = OtelTracer(instrument_llm_clients=False, global_provider=True)  # the flag beats the env
    flagged.init_worker(0, store)
    flagged.teardown_worker(0)
    assert flagged.bridge_mode == "installed"


async def test_manual_attach_after_opting_out(
    fresh_global_provider: None, store: InMemoryLightningStore
) -> None:
    app_provider = TracerProvider()
    tracer = OtelTracer(instrument_llm_clients=False, global_provider=False)
    tracer.init_worker(0, store)
    try:
        assert bridge.attach_span_processor(app_provider)
        assert bridge.attach_span_processor(app_provider)  # idempotent
        rollout_id, attempt_id = await new_attempt(store)
        async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
            app_provider.get_tracer("app").start_span("app step").end()
        assert names(list(await store.query_spans(rollout_id))) == ["app step"]
    finally:
        tracer.teardown_worker(0)
    assert not bridge.attach_span_processor(trace_api.NoOpTracerProvider())


async def test_concurrent_rollouts_never_mix_global_api_spans(
    fresh_global_provider: None, store: InMemoryLightningStore
) -> None:
    tracer = OtelTracer(instrument_llm_clients=False)
    tracer.init_worker(0, store)
    otel = trace_api.get_tracer("app")

    async def rollout(tag: str) -> str:
        rollout_id, attempt_id = await new_attempt(store)
        async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
            for step in range(5):
                with otel.start_as_current_span(f"{tag}-{step}"):
                    await asyncio.sleep(0)
                # a step run in a worker thread keeps its rollout (asyncio.to_thread copies the context)
                await asyncio.to_thread(lambda s=step: otel.start_span(f"{tag}-thread-{s}").end())
        return rollout_id

    try:
        ids = await asyncio.gather(*(rollout(tag) for tag in "abcd"))
        for tag, rollout_id in zip("abcd", ids, strict=True):
            stored = list(await store.query_spans(rollout_id))
            assert len(stored) == 10
            assert {s.name.split("-")[0] for s in stored} == {tag}
    finally:
        tracer.teardown_worker(0)


def test_agl_routing_provider_as_global_needs_no_processor(fresh_global_provider: None) -> None:
    from agl_core.tracer import ActiveTracerProvider

    trace_api.set_tracer_provider(ActiveTracerProvider())  # what a tracer plugin (agl-agentops) installs
    assert bridge.bridge_global_provider() == "routed"


async def test_langgraph_style_agent_gives_triplets_with_agent_match(
    fresh_global_provider: None, store: InMemoryLightningStore, llm_server: Any
) -> None:
    """Graph steps through the global API, the model call through the openai client: triplets per agent."""
    import openai

    from agl_core.adapter import TracerTraceToTriplet

    tracer = OtelTracer()
    tracer.init_worker(0, store)
    client = openai.OpenAI(api_key="test", base_url=llm_server.base_url)
    otel = trace_api.get_tracer("langgraph.fake")
    try:
        rollout_id, attempt_id = await new_attempt(store)
        async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
            for node in ("planner", "writer"):
                with otel.start_as_current_span(node, attributes={"langchain.chain.type": node}):
                    client.chat.completions.create(model="m", messages=[{"role": "user", "content": node}])
            emit_reward(1.0)
        spans = list(await store.query_spans(rollout_id))
    finally:
        tracer.teardown_worker(0)
    triplets = TracerTraceToTriplet(agent_match="^writer$").adapt(spans)
    assert [(t.metadata["agent_name"], t.reward) for t in triplets] == [("writer", 1.0)]
    assert triplets[0].response["token_ids"] == llm_server.tokenizer.encode("writer")
