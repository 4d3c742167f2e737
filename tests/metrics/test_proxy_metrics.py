"""``GET /metrics`` on the LLM proxy: latencies per route, tokens, backend errors, scraped and parsed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from agl_core.llm_proxy import LLMProxy
from agl_core.store.memory import InMemoryLightningStore
from agl_testing.fake_openai import FakeOpenAIServer, Fault, Rule
from tests.metrics.scrape import scrape, value


@pytest.fixture
async def store() -> AsyncIterator[InMemoryLightningStore]:
    store = InMemoryLightningStore()
    yield store
    await store.close()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def _root(proxy: LLMProxy) -> str:
    return proxy.endpoint.removesuffix("/v1")


def _chat(content: str) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": content}]}


async def test_tokens_latency_and_backend_errors_are_scraped(
    store: InMemoryLightningStore, http: aiohttp.ClientSession
) -> None:
    rules = [Rule(when="explode", reply=Fault(status=503))]
    backend_cm = FakeOpenAIServer(rules=rules)
    async with backend_cm as backend, LLMProxy({"m": backend.base_url}, store=store) as proxy:
        started = await store.start_rollout(input={})
        base = proxy.as_resource(started.rollout_id, started.attempt.attempt_id).endpoint
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        for text in ("one two", "three four five"):
            async with http.post(base + "/chat/completions", json=_chat(text)) as response:
                assert response.status == 200
                answer = await response.json()
            for key in usage:
                usage[key] += answer["usage"][key]
        async with http.post(base + "/chat/completions", json=_chat("explode")) as response:
            assert response.status == 503
        async with http.get(proxy.endpoint + "/models") as response:
            assert response.status == 200
        assert await proxy.flush(timeout=30)
        samples = await scrape(http, _root(proxy) + "/metrics")
        [replica] = proxy.stats()["backends"]["m"]

    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert value(samples, "agl_proxy_prompt_tokens_total") == usage["prompt_tokens"]
    assert value(samples, "agl_proxy_completion_tokens_total") == usage["completion_tokens"]
    assert value(samples, "agl_proxy_requests_total") == 3
    assert value(samples, "agl_proxy_backend_errors_total") == 1
    assert value(samples, "agl_proxy_requests_failed_total") == 1
    assert value(samples, "agl_proxy_spans_written_total") == 3
    assert value(samples, "agl_proxy_spans_pending") == 0
    assert value(samples, "agl_proxy_request_duration_seconds_count", route="chat_completions") == 3
    assert value(samples, "agl_proxy_request_duration_seconds_count", route="models") == 1
    failures = value(
        samples, "agl_proxy_backend_connection_failures_total", model="m", backend=replica["backend"]
    )
    assert failures == 0


async def test_unreachable_backend_counts_a_connection_failure(http: aiohttp.ClientSession) -> None:
    async with FakeOpenAIServer() as backend:
        dead_url = backend.base_url  # the server is gone once the block ends
    async with LLMProxy({"m": dead_url}, max_retries=0) as proxy:
        async with http.post(proxy.endpoint + "/chat/completions", json=_chat("hi")) as response:
            assert response.status == 502
        samples = await scrape(http, _root(proxy) + "/metrics")
        [replica] = proxy.stats()["backends"]["m"]
    assert value(samples, "agl_proxy_backend_errors_total") == 1
    failures = value(
        samples, "agl_proxy_backend_connection_failures_total", model="m", backend=replica["backend"]
    )
    assert failures == 1


async def test_metrics_need_the_proxy_token(http: aiohttp.ClientSession) -> None:
    async with FakeOpenAIServer() as backend, LLMProxy({"m": backend.base_url}, token="s3cret") as proxy:
        async with http.get(_root(proxy) + "/metrics") as response:
            assert response.status == 401
        samples = await scrape(http, _root(proxy) + "/metrics", token="s3cret")
    assert value(samples, "agl_proxy_requests_total") == 0
