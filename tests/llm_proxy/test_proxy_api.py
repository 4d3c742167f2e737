"""The LLMProxy Python API: resources, lifecycle, thread mode, model lists, stats."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pytest

from agl_core.llm_proxy import HttpBackend, LLMProxy, model_list_to_backends
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import LLM, ProxyLLM
from agl_testing.fake_openai import FakeOpenAIServer
from tests.llm_proxy.conftest import Rollout, chat


async def test_as_resource_without_ids_is_a_proxy_llm_and_with_ids_a_routed_llm(proxy: LLMProxy) -> None:
    plain = proxy.as_resource(sampling_parameters={"temperature": 0.7})
    assert type(plain) is ProxyLLM
    assert plain.endpoint == proxy.endpoint and plain.endpoint.endswith("/v1")
    assert plain.model == "m" and plain.sampling_parameters == {"temperature": 0.7}
    routed = proxy.as_resource("ro-1", "at-2")
    assert type(routed) is LLM
    assert routed.endpoint == proxy.endpoint.removesuffix("/v1") + "/rollout/ro-1/attempt/at-2/v1"
    assert routed.endpoint == plain.get_base_url("ro-1", "at-2")
    with pytest.raises(ValueError, match="both rollout_id and attempt_id"):
        proxy.as_resource("ro-1")
    with pytest.raises(ValueError, match="both rollout_id and attempt_id"):
        proxy.as_resource(attempt_id="at-1")


async def test_as_resource_model_selection_rules(backend_a: FakeOpenAIServer) -> None:
    url = backend_a.base_url
    assert LLMProxy({"only": url}, port=1234).as_resource().model == "only"
    with pytest.raises(ValueError, match="No models found"):
        LLMProxy(port=1234).as_resource()
    with pytest.raises(ValueError, match="No models found"):
        LLMProxy({"*": url}, port=1234).as_resource()
    several = LLMProxy({"a": url, "b": url}, port=1234)
    with pytest.raises(ValueError, match=r"several models \['a', 'b'\]"):
        several.as_resource()
    assert several.as_resource(model="b").model == "b"
    # a model_list whose entries share one name is one model with several replicas
    shared = LLMProxy(
        model_list=[
            {"model_name": "policy", "litellm_params": {"model": "hosted_vllm/Qwen/Qwen3", "api_base": url}},
            {
                "model_name": "policy",
                "litellm_params": {"model": "hosted_vllm/Qwen/Qwen3", "api_base": url + "/"},
            },
        ],
        port=1234,
    )
    assert shared.as_resource().model == "policy"


def test_endpoint_needs_a_port() -> None:
    with pytest.raises(RuntimeError, match="call start"):
        _ = LLMProxy({"m": "http://127.0.0.1:9/v1"}).endpoint
    assert LLMProxy(port=4321).endpoint == "http://127.0.0.1:4321/v1"
    assert LLMProxy(port=4321, access_host="gpu-box").endpoint == "http://gpu-box:4321/v1"
    assert LLMProxy(host="::1", port=4321).endpoint == "http://[::1]:4321/v1"


def test_constructor_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="either backends or model_list"):
        LLMProxy({"m": "http://h/v1"}, model_list=[])
    with pytest.raises(ValueError, match="port"):
        LLMProxy(port=70000)
    with pytest.raises(ValueError, match="balancing"):
        LLMProxy(balancing="random")  # type: ignore[arg-type]


def test_model_list_conversion_strips_litellm_provider_prefixes() -> None:
    spec = model_list_to_backends(
        [
            {
                "model_name": "policy",
                "litellm_params": {"model": "hosted_vllm/Qwen/Qwen3-4B", "api_base": "http://a/v1"},
            },
            {
                "model_name": "judge",
                "litellm_params": {"model": "judge", "api_base": "http://b/v1", "api_key": "k"},
            },
        ]
    )
    assert spec == {
        "policy": [HttpBackend("http://a/v1", model="Qwen/Qwen3-4B")],
        "judge": [HttpBackend("http://b/v1", api_key="k")],
    }
    from agl_core.llm_proxy import BackendConfigError

    with pytest.raises(BackendConfigError, match="api_base"):  # no default server for hosted_vllm
        model_list_to_backends([{"model_name": "x", "litellm_params": {"model": "hosted_vllm/x"}}])
    with pytest.raises(BackendConfigError, match="model_name"):
        model_list_to_backends([{"litellm_params": {}}])  # type: ignore[list-item]


async def test_update_model_list_takes_effect_without_restart_and_rewrites_the_model(
    proxy: LLMProxy, backend_b: FakeOpenAIServer, http: aiohttp.ClientSession
) -> None:
    proxy.update_model_list(
        [
            {
                "model_name": "m",
                "litellm_params": {"model": "hosted_vllm/served-name", "api_base": backend_b.base_url},
            }
        ]
    )
    async with http.post(proxy.endpoint + "/chat/completions", json=chat("x")) as response:
        assert response.status == 200
    assert backend_b.requests[-1].body["model"] == "served-name"


async def test_lifecycle_start_stop_restart(
    backend_a: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = LLMProxy({"m": backend_a.base_url})
    assert not proxy.is_running()
    await proxy.start()
    try:
        assert proxy.is_running()
        with pytest.raises(RuntimeError, match="already running"):
            await proxy.start()
        endpoint = proxy.endpoint
        await proxy.restart()
        assert proxy.is_running() and proxy.endpoint == endpoint  # agents keep their URL
    finally:
        await proxy.stop()
    assert not proxy.is_running()
    with caplog.at_level(logging.WARNING, logger="agl_core.llm_proxy"):
        await proxy.stop()
    assert "not running" in caplog.text


async def test_stop_waits_for_in_flight_requests_and_flushes_their_spans(
    store: InMemoryLightningStore, rollout: Rollout, http: aiohttp.ClientSession
) -> None:
    async with FakeOpenAIServer(latency_s=0.2) as slow:
        proxy = LLMProxy({"m": slow.base_url}, store=store)
        await proxy.start()
        url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint + "/chat/completions"
        pending = [asyncio.ensure_future(http.post(url, json=chat(f"r{n}"))) for n in range(5)]
        deadline = asyncio.get_running_loop().time() + 10
        while len(slow.requests) < 5:  # bounded wait until all five are at the backend
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.005)
        await proxy.stop()
        responses = await asyncio.gather(*pending)
    assert [r.status for r in responses] == [200] * 5
    for response in responses:
        response.release()
    assert len(await store.query_spans(rollout.rollout_id)) == 5


def test_thread_mode_serves_synchronous_callers() -> None:
    import json
    import urllib.request

    store = InMemoryLightningStore()
    started = asyncio.run(store.start_rollout(input=1))
    with FakeOpenAIServer() as backend, LLMProxy({"m": backend.base_url}, store=store) as proxy:
        url = proxy.as_resource(started.rollout_id, started.attempt.attempt_id).endpoint + "/chat/completions"
        request = urllib.request.Request(
            url, data=json.dumps(chat("sync")).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert json.loads(response.read())["choices"][0]["message"]["content"] == "sync"
    assert not proxy.is_running()
    spans = asyncio.run(store.query_spans(started.rollout_id))
    assert len(spans) == 1 and spans[0].attributes["response_token_ids"]


def test_thread_mode_refuses_a_store_that_is_not_thread_safe() -> None:
    store = InMemoryLightningStore(thread_safe=False)
    with pytest.raises(RuntimeError, match="not thread-safe"):
        LLMProxy({"m": "http://127.0.0.1:9/v1"}, store=store).start_in_thread()


async def test_without_a_store_requests_are_served_and_counted_unrecorded(
    backend_a: FakeOpenAIServer, rollout: Rollout, store: InMemoryLightningStore, http: aiohttp.ClientSession
) -> None:
    async with LLMProxy({"m": backend_a.base_url}) as proxy:
        url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint + "/chat/completions"
        async with http.post(url, json=chat("x")) as response:
            assert response.status == 200
        assert proxy.stats()["requests_unrecorded"] == 1
        proxy.set_store(store)  # attached later: recording starts
        async with http.post(url, json=chat("y")) as response:
            assert response.status == 200
        assert await proxy.flush(timeout=5)
    [span] = await store.query_spans(rollout.rollout_id)
    assert span.attributes["response_token_ids"]


def test_model_list_entry_without_api_base_goes_where_litellm_sent_openai_models(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    entry = {"model_name": "gpt", "litellm_params": {"model": "openai/gpt-4o-mini"}}
    assert model_list_to_backends([entry]) == {
        "gpt": [HttpBackend("https://api.openai.com/v1", api_key="sk-env", model="gpt-4o-mini")]
    }
    monkeypatch.setenv("OPENAI_BASE_URL", "http://local/v1")
    assert model_list_to_backends([entry])["gpt"][0].url == "http://local/v1"
