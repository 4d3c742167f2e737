"""Without the agl-proxy-translate plugin, /v1/responses and /v1/messages answer 501 with the install line."""

from __future__ import annotations

import importlib.util

import aiohttp
import pytest

from agl_core.llm_proxy import LLMProxy
from agl_core.store.memory import InMemoryLightningStore
from agl_testing.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("agl_proxy_translate") is not None,
    reason="agl-proxy-translate is installed here (its own tests cover the routes)",
)


@pytest.mark.parametrize("route", ["/v1/responses", "/v1/messages", "/responses"])
async def test_translated_routes_answer_501_naming_the_plugin(
    backend_a: FakeOpenAIServer, http: aiohttp.ClientSession, route: str
) -> None:
    store = InMemoryLightningStore()
    started = await store.start_rollout(input=1)
    body = {"model": "m", "input": "hi", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    async with LLMProxy({"m": backend_a.base_url}, store=store) as proxy:
        base = proxy.as_resource(started.rollout_id, started.attempt.attempt_id).endpoint.removesuffix("/v1")
        async with http.post(base + route, json=body) as response:
            assert response.status == 501, await response.text()
            error = (await response.json())["error"]
        assert await proxy.flush(timeout=10)
    assert "pip install agl-proxy-translate" in error["message"] and error["code"] == "not_implemented"
    assert backend_a.requests == []  # nothing reached the backend
    (span,) = (await store.query_spans(started.rollout_id)).items  # the refusal is recorded
    assert span.attributes["http.response.status_code"] == 501
