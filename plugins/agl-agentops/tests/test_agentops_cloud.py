"""Sending to AgentOps (a local fake of it): delivered when asked for, never on the rollout's path."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import openai
import pytest

from agl_agentops.tracer import AgentOpsTracer
from agl_core.emitter import emit_reward
from agl_core.semconv import RESPONSE_TOKEN_IDS
from agl_core.store.memory import InMemoryLightningStore
from agl_testing.fake_openai import FakeOpenAIServer

from .conftest import new_attempt
from .fake_agentops import API_KEY, PROJECT_ID, TOKEN, FakeAgentOpsServer, closed_port_url

ROLLOUT_BOUND_S = 3.0
"""Upper bound for a rollout whatever AgentOps does; AgentOps' own flush blocks ~7 s on a dead endpoint."""


@pytest.fixture
def agentops_server() -> Iterator[FakeAgentOpsServer]:
    with FakeAgentOpsServer() as server:
        yield server


def sending_tracer(api_url: str, traces_url: str, **options: float) -> AgentOpsTracer:
    return AgentOpsTracer(
        send_to_agentops=True,
        api_key=API_KEY,
        endpoint=api_url,
        exporter_endpoint=traces_url,
        export_interval=0.05,
        **options,
    )


async def rollout(
    tracer: AgentOpsTracer, store: InMemoryLightningStore, llm: FakeOpenAIServer, text: str
) -> str:
    """One traced rollout: a chat call, a print, a reward. Returns the rollout id."""
    client = openai.AsyncOpenAI(api_key="test", base_url=llm.base_url, max_retries=0)
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context("episode", rollout_id=rollout_id, attempt_id=attempt_id):
        await client.chat.completions.create(model="policy", messages=[{"role": "user", "content": text}])
        print(f"agent says {text}")
        emit_reward(1.0)
    return rollout_id


async def test_with_a_key_and_sending_enabled_agentops_receives_auth_spans_and_logs(
    store: InMemoryLightningStore, llm_server: FakeOpenAIServer, agentops_server: FakeAgentOpsServer
) -> None:
    tracer = sending_tracer(agentops_server.url, agentops_server.traces_url)
    tracer.init_worker(0, store)
    try:
        rollout_id = await rollout(tracer, store, llm_server, "hello agentops")
    finally:
        tracer.teardown_worker(0)  # delivers what is still queued

    stored = list(await store.query_spans(rollout_id))
    auth = [r for r in agentops_server.received if r.path == "/v3/auth/token"]
    assert len(auth) == 1 and API_KEY.encode() in auth[0].body
    traces = [r for r in agentops_server.received if r.path == "/v1/traces"]
    assert traces and all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in traces)
    assert all(r.headers["Content-Type"] == "application/x-protobuf" for r in traces)
    assert all(r.status == 200 for r in agentops_server.received)
    assert sorted(s.span_id for s in agentops_server.spans) == sorted(s.span_id for s in stored)
    exported = {s.name: s for s in agentops_server.spans}
    assert exported["openai.chat.completion"].attributes[RESPONSE_TOKEN_IDS] == llm_server.tokenizer.encode(
        "hello agentops"
    )
    assert exported["episode.session"].attributes["agentlightning.rollout_id"] == rollout_id
    assert exported["episode.session"].resource["agentlightning.tracer.name"] == "agentops"
    (logs,) = [r for r in agentops_server.received if r.path == "/v4/logs/upload/"]
    assert b"agent says hello agentops" in logs.body
    assert int(logs.headers["Trace-Id"]) == int(exported["episode.session"].trace_id, 16)
    stats = tracer.get_agentops_export_stats()
    assert stats is not None and stats.spans_exported == len(stored) and stats.spans_failed == 0
    assert tracer.exporter_probe is not None
    assert PROJECT_ID  # the fake's auth answer is what the SDK expects: {"token", "project_id"}


@pytest.mark.parametrize("auth_reachable", [False, True], ids=["all-down", "otlp-down"])
async def test_a_closed_agentops_port_neither_slows_nor_fails_the_rollout(
    store: InMemoryLightningStore,
    llm_server: FakeOpenAIServer,
    agentops_server: FakeAgentOpsServer,
    caplog: pytest.LogCaptureFixture,
    auth_reachable: bool,
) -> None:
    dead = closed_port_url()
    api = agentops_server.url if auth_reachable else dead
    tracer = sending_tracer(api, dead + "/v1/traces", export_timeout=1.0)
    tracer.init_worker(0, store)
    try:
        with caplog.at_level(logging.WARNING, logger="agl_core.tracer.agentops"):
            rollout_ids = [
                await asyncio.wait_for(rollout(tracer, store, llm_server, f"turn {i}"), ROLLOUT_BOUND_S)
                for i in range(3)
            ]
    finally:
        tracer.teardown_worker(0)
    for rollout_id in rollout_ids:
        names = sorted(s.name for s in await store.query_spans(rollout_id))
        assert names == ["agentlightning.annotation", "episode.session", "openai.chat.completion"]
    stats = tracer.get_agentops_export_stats()
    assert stats is not None and stats.spans_exported == 0 and stats.spans_failed == 9
    assert "NOT delivered to AgentOps" in caplog.text


async def test_a_hanging_agentops_neither_slows_nor_fails_the_rollout(
    store: InMemoryLightningStore, llm_server: FakeOpenAIServer
) -> None:
    with FakeAgentOpsServer(hang=True) as stuck:
        tracer = sending_tracer(stuck.url, stuck.traces_url, export_timeout=30.0)
        tracer.init_worker(0, store)
        try:
            first = await asyncio.wait_for(rollout(tracer, store, llm_server, "one"), ROLLOUT_BOUND_S)
            # The exporter is now stuck inside a request the server does not answer...
            assert await asyncio.to_thread(stuck.wait_for, lambda s: len(s.received) >= 1, 10.0)
            # ...and further rollouts run while it stays stuck.
            second = await asyncio.wait_for(rollout(tracer, store, llm_server, "two"), ROLLOUT_BOUND_S)
            assert all(r.status is None for r in stuck.received)
            stuck.release()
        finally:
            tracer.teardown_worker(0)
    for rollout_id in (first, second):
        assert len(await store.query_spans(rollout_id)) == 3
    stats = tracer.get_agentops_export_stats()
    assert stats is not None and stats.spans_exported == 6  # delivered once the server answered


async def test_nothing_is_sent_without_send_to_agentops_even_with_a_key_in_the_environment(
    store: InMemoryLightningStore,
    llm_server: FakeOpenAIServer,
    agentops_server: FakeAgentOpsServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENTOPS_API_KEY", API_KEY)
    monkeypatch.setenv("AGENTOPS_API_ENDPOINT", agentops_server.url)
    monkeypatch.setenv("AGENTOPS_EXPORTER_ENDPOINT", agentops_server.traces_url)
    tracer = AgentOpsTracer()
    tracer.init_worker(0, store)
    try:
        rollout_id = await rollout(tracer, store, llm_server, "keep it local")
    finally:
        tracer.teardown_worker(0)
    assert len(await store.query_spans(rollout_id)) == 3
    assert tracer.get_agentops_export_stats() is None
    assert agentops_server.received == []
