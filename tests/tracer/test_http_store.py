"""OtelTracer against the HTTP store (an OTLP-capable store): spans go through the store API in batches."""

from __future__ import annotations

import openai

from agl_core.emitter import emit_reward, find_final_reward
from agl_core.semconv import RESPONSE_TOKEN_IDS
from agl_core.store.http.client import LightningStoreClient
from agl_core.store.http.server import LightningStoreServer
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer.otel import OtelTracer
from agl_testing.fake_openai import FakeOpenAIServer


async def test_spans_reach_the_server_before_trace_context_returns(llm_server: FakeOpenAIServer) -> None:
    backing = InMemoryLightningStore()
    server = LightningStoreServer(backing, port=0)
    await server.start()
    client_store = LightningStoreClient(f"http://127.0.0.1:{server.port}")
    tracer = OtelTracer()
    tracer.init_worker(0, client_store)
    try:
        assert client_store.capabilities.get("otlp_traces") is True
        attempted = await client_store.start_rollout(input={"q": 1})
        llm = openai.AsyncOpenAI(api_key="test", base_url=llm_server.base_url)
        async with tracer.trace_context(
            rollout_id=attempted.rollout_id, attempt_id=attempted.attempt.attempt_id
        ):
            await llm.chat.completions.create(model="m", messages=[{"role": "user", "content": "over http"}])
            for i in range(50):
                emit_reward(i / 10)
        spans = list(await backing.query_spans(attempted.rollout_id))  # read the server's own store directly
        assert len(spans) == 51
        assert spans[0].attributes[RESPONSE_TOKEN_IDS] == llm_server.tokenizer.encode("over http")
        assert [s.sequence_id for s in spans] == list(range(1, 52))
        assert find_final_reward(spans) == 4.9
        report = tracer.get_last_export_report()
        assert report is not None and report.ok and report.spans_stored == 51
    finally:
        tracer.teardown_worker(0)
        await client_store.close()
        await server.stop()
