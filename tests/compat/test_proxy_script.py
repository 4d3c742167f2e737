"""0.3's minimal LLM-proxy script: ``LLMProxy(model_list=..., store=server, callbacks=...)`` records spans."""

from __future__ import annotations

import openai
import pytest

import agl_core as agl
from agl_testing.fake_openai import FakeOpenAIServer


async def test_proxy_over_a_store_server_records_the_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeOpenAIServer(["Paris."], token_ids="always") as model:
        # 0.3 configs often leave api_base out for OpenAI models: LiteLLM read OPENAI_BASE_URL
        monkeypatch.setenv("OPENAI_BASE_URL", model.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
        store = agl.InMemoryLightningStore()
        server = agl.LightningStoreServer(store, "127.0.0.1", 0)
        await server.start()
        proxy = agl.LLMProxy(
            port=0,
            model_list=[{"model_name": "gpt-4o-mini", "litellm_params": {"model": "openai/gpt-4o-mini"}}],
            store=server,
            callbacks=["return_token_ids", "opentelemetry"],
        )
        try:
            async with proxy:
                rollout = await server.start_rollout(input={"q": "capital of France?"})
                resource = proxy.as_resource(rollout.rollout_id, rollout.attempt.attempt_id)
                client = openai.AsyncOpenAI(base_url=resource.endpoint, api_key="unused")
                reply = await client.chat.completions.create(
                    model=resource.model, messages=[{"role": "user", "content": "Capital of France?"}]
                )
                await client.close()
                assert reply.choices[0].message.content == "Paris."
                assert await proxy.flush(timeout=30)
            spans = list(await store.query_spans(rollout.rollout_id))
            assert spans, "the proxy recorded nothing through the server"
            resource = spans[0].resource.attributes  # where 0.3's LiteLLM exporter put the ids
            assert resource["agentlightning.rollout_id"] == rollout.rollout_id
            assert resource["agentlightning.attempt_id"] == rollout.attempt.attempt_id
            assert resource["agentlightning.span_sequence_id"] == spans[0].sequence_id
            triplets = agl.LlmProxyTraceToTriplet().adapt(spans)
            assert len(triplets) == 1 and triplets[0].response["token_ids"]
        finally:
            await server.stop()


def test_proxy_callbacks_agl_cannot_apply_name_what_to_do() -> None:
    with pytest.raises(ValueError, match="logprobs=True"):
        agl.LLMProxy(callbacks=["logprobs"])
    with pytest.raises(ValueError, match="not LiteLLM"):
        agl.LLMProxy(callbacks=["my_litellm_callback"])
