"""AgentOps-instrumented ``openai`` calls land in the agl store of the current attempt, with token ids."""

from __future__ import annotations

import json

import openai
import pytest

from agl_agentops.tracer import AgentOpsTracer
from agl_core.adapter.triplet import TracerTraceToTriplet
from agl_core.emitter import emit_reward
from agl_core.semconv import LOGPROBS_CONTENT, PROMPT_TOKEN_IDS, RESPONSE_TOKEN_IDS
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import Span
from agl_testing.fake_openai import FakeOpenAIServer, Reply, ToolCall

from .conftest import new_attempt

LLM_SPAN = "openai.chat.completion"
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def by_name(spans: list[Span], name: str) -> list[Span]:
    return [span for span in spans if span.name == name]


async def test_sync_async_and_streamed_calls_are_stored_with_ids_content_and_token_ids(
    tracer: AgentOpsTracer, store: InMemoryLightningStore, llm_server: FakeOpenAIServer
) -> None:
    tokenizer = llm_server.tokenizer
    client = openai.OpenAI(api_key="test", base_url=llm_server.base_url)
    aclient = openai.AsyncOpenAI(api_key="test", base_url=llm_server.base_url)
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context("solve", rollout_id=rollout_id, attempt_id=attempt_id):
        first = client.chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "what is two plus two"}], logprobs=True
        )
        await aclient.chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "and three"}]
        )
        stream = await aclient.chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "stream it please"}], stream=True
        )
        streamed = "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])
        emit_reward(0.5)

    spans = list(await store.query_spans(rollout_id))
    assert {(s.rollout_id, s.attempt_id) for s in spans} == {(rollout_id, attempt_id)}
    sequence_ids = [s.sequence_id for s in spans]
    assert len(set(sequence_ids)) == len(spans) and sequence_ids == sorted(sequence_ids)
    (session,) = by_name(spans, "solve.session")
    assert session.attributes["agentops.span.kind"] == "session"
    assert session.attributes["agentlightning.rollout_id"] == rollout_id
    assert session.attributes["agentops.session.end_state"] == "SUCCESS"
    assert session.resource.attributes["agentlightning.tracer.name"] == "agentops"

    plain, awaited, streamed_span = by_name(spans, LLM_SPAN)
    assert {plain.parent_id, awaited.parent_id, streamed_span.parent_id} == {session.span_id}
    assert plain.sequence_id < awaited.sequence_id < streamed_span.sequence_id
    assert plain.attributes["gen_ai.prompt.0.content"] == "what is two plus two"
    assert plain.attributes["gen_ai.completion.0.content"] == "what is two plus two"
    assert plain.attributes[PROMPT_TOKEN_IDS] == first.model_extra["prompt_token_ids"]
    assert plain.attributes[RESPONSE_TOKEN_IDS] == tokenizer.encode("what is two plus two")
    logprobs = json.loads(str(plain.attributes[LOGPROBS_CONTENT]))
    assert [entry["token"] for entry in logprobs] == tokenizer.pieces("what is two plus two")
    assert LOGPROBS_CONTENT not in awaited.attributes  # not requested
    assert awaited.attributes[RESPONSE_TOKEN_IDS] == tokenizer.encode("and three")
    assert streamed == "stream it please"
    assert streamed_span.attributes[RESPONSE_TOKEN_IDS] == tokenizer.encode("stream it please")
    assert streamed_span.attributes[PROMPT_TOKEN_IDS]

    report = tracer.get_last_export_report()
    assert report is not None and report.ok and report.spans_stored == len(spans)
    assert [s.span_id for s in tracer.get_last_trace()] == [s.span_id for s in spans]


async def test_triplets_from_agentops_spans_carry_token_ids_and_rewards(
    tracer: AgentOpsTracer, store: InMemoryLightningStore, llm_server: FakeOpenAIServer
) -> None:
    tokenizer = llm_server.tokenizer
    client = openai.OpenAI(api_key="test", base_url=llm_server.base_url)
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "first turn"}])
        emit_reward(0.25)
        client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "second turn"}])
        emit_reward(1.0)

    triplets = TracerTraceToTriplet().adapt(list(await store.query_spans(rollout_id)))
    assert [t.response["token_ids"] for t in triplets] == [
        tokenizer.encode("first turn"),
        tokenizer.encode("second turn"),
    ]
    assert all(t.prompt["token_ids"] for t in triplets)
    assert [t.reward for t in triplets] == [0.25, 1.0]
    assert triplets[0].prompt["raw_content"] == [{"role": "user", "content": "first turn"}]


async def test_tools_are_recorded_and_a_failing_body_ends_the_trace_as_error(
    tracer: AgentOpsTracer, store: InMemoryLightningStore
) -> None:
    reply = Reply(tool_calls=[ToolCall(name="lookup", arguments={"q": "x"}, id="call_1")])
    with FakeOpenAIServer([reply], token_ids="always") as server:
        client = openai.OpenAI(api_key="test", base_url=server.base_url)
        rollout_id, attempt_id = await new_attempt(store)
        with pytest.raises(RuntimeError, match="agent crashed"):
            async with tracer.trace_context("tooling", rollout_id=rollout_id, attempt_id=attempt_id):
                client.chat.completions.create(
                    model="policy", messages=[{"role": "user", "content": "look it up"}], tools=TOOLS
                )
                raise RuntimeError("agent crashed")
    spans = list(await store.query_spans(rollout_id))
    (llm,) = by_name(spans, LLM_SPAN)
    assert json.loads(str(llm.attributes["gen_ai.tool.definitions"])) == [
        {"type": "function", **TOOLS[0]["function"]}
    ]
    assert llm.attributes[RESPONSE_TOKEN_IDS]  # the tool call's token ids
    (session,) = by_name(spans, "tooling.session")
    assert session.attributes["agentops.session.end_state"] == "ERROR"


async def test_calls_outside_a_trace_context_are_not_recorded(
    tracer: AgentOpsTracer, store: InMemoryLightningStore, llm_server: FakeOpenAIServer
) -> None:
    client = openai.OpenAI(api_key="test", base_url=llm_server.base_url)
    client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "untraced"}])
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        pass
    names = [s.name for s in await store.query_spans(rollout_id)]
    assert names == [f"{rollout_id}.session"]


async def test_agentops_own_exporter_is_never_on_the_store_path(
    store: InMemoryLightningStore, llm_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentops.sdk.exporters import AuthenticatedOTLPExporter

    calls: list[int] = []

    def tripwire(self: object, spans: object) -> None:
        calls.append(1)
        raise AssertionError("AgentOps' exporter must not be used by agl")

    monkeypatch.setattr(AuthenticatedOTLPExporter, "export", tripwire)
    tracer = AgentOpsTracer()
    tracer.init_worker(0, store)
    try:
        client = openai.OpenAI(api_key="test", base_url=llm_server.base_url)
        rollout_id, attempt_id = await new_attempt(store)
        async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
            client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "hi"}])
    finally:
        tracer.teardown_worker(0)
    assert len(by_name(list(await store.query_spans(rollout_id)), LLM_SPAN)) == 1
    assert calls == []


async def test_bad_configuration_fails_with_clear_errors(
    store: InMemoryLightningStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTOPS_API_KEY", raising=False)
    with pytest.raises(ValueError, match="needs an AgentOps API key"):
        AgentOpsTracer(send_to_agentops=True).init_worker(0, store)
    with pytest.raises(ValueError, match="agentops_managed=True"):
        AgentOpsTracer(send_to_agentops=True, agentops_managed=False)
    with pytest.raises(ValueError, match="export_timeout"):
        AgentOpsTracer(export_timeout=0)
    tracer = AgentOpsTracer()
    with pytest.raises(RuntimeError, match="init_worker"):
        async with tracer.trace_context():
            pass


async def test_get_last_trace_inside_the_context_is_the_current_rollout(
    tracer: AgentOpsTracer, store: InMemoryLightningStore, llm_server: FakeOpenAIServer
) -> None:
    """What an ``on_trace_end`` hook sees: this rollout's spans so far, never the previous rollout's."""
    client = openai.OpenAI(api_key="test", base_url=llm_server.base_url)
    for turn in ("first", "second"):
        rollout_id, attempt_id = await new_attempt(store)
        async with tracer.trace_context(turn, rollout_id=rollout_id, attempt_id=attempt_id):
            client.chat.completions.create(model="policy", messages=[{"role": "user", "content": turn}])
            inside = tracer.get_last_trace()
            (llm,) = by_name(inside, LLM_SPAN)
            assert llm.attributes["gen_ai.prompt.0.content"] == turn
            assert {s.rollout_id for s in inside} == {rollout_id}
