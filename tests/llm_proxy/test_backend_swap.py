"""Replacing backends while requests are in flight drops nothing."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from agl_core.llm_proxy import BackendConfigError, LLMProxy
from agl_core.store.memory import InMemoryLightningStore
from agl_testing.fake_openai import FakeOpenAIServer
from tests.llm_proxy.conftest import Rollout, chat


async def _wait_until(condition, what: str, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    """Poll ``condition`` (bounded) — used to observe the fake servers' received requests."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


async def test_swap_under_load_of_200_concurrent_requests_drops_none(
    store: InMemoryLightningStore, rollout: Rollout
) -> None:
    async with (
        FakeOpenAIServer(latency_s=0.3) as old,
        FakeOpenAIServer(latency_s=0.05) as new,
        LLMProxy({"m": old.base_url}, store=store) as proxy,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http,
    ):
        url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint + "/chat/completions"
        labels = {old.base_url, new.base_url}

        async def call(n: int) -> str:
            async with http.post(url, json=chat(f"request {n}")) as response:
                assert response.status == 200, await response.text()
                return (await response.json())["choices"][0]["message"]["content"]

        first = [asyncio.ensure_future(call(n)) for n in range(100)]
        await _wait_until(lambda: len(old.requests) == 100, "100 requests in flight at the old backend")
        assert not any(task.done() for task in first)  # all still in flight when the swap happens
        proxy.update_backends({"m": [new.base_url]})
        second = [asyncio.ensure_future(call(n)) for n in range(100, 200)]
        results = await asyncio.gather(*first, *second)
        assert results == [f"request {n}" for n in range(200)]
        assert len(old.requests) == 100 and len(new.requests) == 100
        assert {r.body["messages"][0]["content"] for r in new.requests} == {
            f"request {n}" for n in range(100, 200)
        }
        assert await proxy.flush(timeout=10)
        stats = proxy.stats()
    assert stats["requests_failed"] == 0 and stats["retries"] == 0
    assert stats["spans_written"] == 200
    spans = list(await store.query_spans(rollout.rollout_id))
    assert sorted(s.sequence_id for s in spans) == list(range(1, 201))
    assert {s.attributes["agl.llm.backend"] for s in spans} == labels


async def test_invalid_update_keeps_the_old_backends(proxy: LLMProxy, http: aiohttp.ClientSession) -> None:
    with pytest.raises(BackendConfigError, match="not an http"):
        proxy.update_backends({"m": ["ftp://nowhere"]})
    with pytest.raises(BackendConfigError, match="no backends"):
        proxy.update_backends({"m": []})
    async with http.post(proxy.endpoint + "/chat/completions", json=chat("still here")) as response:
        assert response.status == 200


async def test_new_model_names_are_served_and_removed_ones_are_404(
    proxy: LLMProxy, backend_a: FakeOpenAIServer, http: aiohttp.ClientSession
) -> None:
    proxy.update_backends({"policy-v2": backend_a.base_url})
    assert proxy.model_names() == ["policy-v2"]
    async with http.get(proxy.endpoint + "/models") as response:
        assert [m["id"] for m in (await response.json())["data"]] == ["policy-v2"]
    async with http.post(
        proxy.endpoint + "/chat/completions", json={**chat("x"), "model": "policy-v2"}
    ) as response:
        assert response.status == 200
    async with http.post(proxy.endpoint + "/chat/completions", json=chat("x")) as response:
        assert response.status == 404
        error = (await response.json())["error"]
    assert error["code"] == "model_not_found" and "policy-v2" in error["message"]


async def test_replicas_kept_across_an_update_keep_their_counters(
    proxy: LLMProxy, backend_a: FakeOpenAIServer, backend_b: FakeOpenAIServer, http: aiohttp.ClientSession
) -> None:
    for _ in range(4):
        async with http.post(proxy.endpoint + "/chat/completions", json=chat("x")) as response:
            assert response.status == 200
    proxy.update_backends({"m": [backend_b.base_url]})
    [kept] = proxy.stats()["backends"]["m"]
    assert kept["backend"] == backend_b.base_url and kept["requests"] == 2
