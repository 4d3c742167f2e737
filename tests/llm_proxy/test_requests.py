"""What agents get for bad requests, auth, size limits and the small routes."""

from __future__ import annotations

import aiohttp
import pytest

from agl_core.llm_proxy import LLMProxy
from agl_testing.fake_openai import FakeOpenAIServer
from tests.llm_proxy.conftest import chat


def _is_openai_error(body: object) -> bool:
    return (
        isinstance(body, dict)
        and set(body) == {"error"}
        and set(body["error"]) == {"message", "type", "param", "code"}
        and isinstance(body["error"]["message"], str)
        and bool(body["error"]["message"])
    )


@pytest.mark.parametrize(
    ("path", "data", "param", "fragment"),
    [
        ("/chat/completions", b"", None, "empty"),
        ("/chat/completions", b"{not json", None, "not valid JSON"),
        ("/chat/completions", b"[1, 2]", None, "JSON object"),
        ("/chat/completions", b'{"messages": [{"role": "user", "content": "x"}]}', "model", "'model'"),
        ("/chat/completions", b'{"model": 3, "messages": []}', "model", "'model'"),
        ("/chat/completions", b'{"model": "m"}', "messages", "'messages'"),
        ("/chat/completions", b'{"model": "m", "messages": []}', "messages", "'messages'"),
        ("/chat/completions", b'{"model": "m", "messages": ["hi"]}', "messages", "'messages'"),
        (
            "/chat/completions",
            b'{"model": "m", "messages": [{"role": "user"}], "stream": "yes"}',
            "stream",
            "'stream'",
        ),
        ("/completions", b'{"model": "m"}', "prompt", "'prompt'"),
        ("/completions", b'{"model": "m", "prompt": 5}', "prompt", "'prompt'"),
    ],
)
async def test_malformed_requests_get_400_with_an_openai_error_body(
    proxy: LLMProxy,
    backend_a: FakeOpenAIServer,
    backend_b: FakeOpenAIServer,
    http: aiohttp.ClientSession,
    path: str,
    data: bytes,
    param: str | None,
    fragment: str,
) -> None:
    async with http.post(
        proxy.endpoint + path, data=data, headers={"Content-Type": "application/json"}
    ) as response:
        assert response.status == 400
        body = await response.json()
    assert _is_openai_error(body)
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["param"] == param
    assert fragment in body["error"]["message"]
    assert backend_a.requests == backend_b.requests == []  # never forwarded
    assert proxy.stats()["requests_failed"] == 1


async def test_unknown_model_is_404_model_not_found(proxy: LLMProxy, http: aiohttp.ClientSession) -> None:
    async with http.post(
        proxy.endpoint + "/chat/completions", json={**chat("x"), "model": "gpt-9"}
    ) as response:
        assert response.status == 404
        body = await response.json()
    assert _is_openai_error(body) and body["error"]["code"] == "model_not_found"
    assert "'gpt-9'" in body["error"]["message"] and "['m']" in body["error"]["message"]


async def test_wildcard_model_serves_any_name(
    backend_a: FakeOpenAIServer, http: aiohttp.ClientSession
) -> None:
    async with LLMProxy({"*": backend_a.base_url}) as proxy:
        async with http.post(
            proxy.endpoint + "/chat/completions", json={**chat("x"), "model": "anything"}
        ) as r:
            assert r.status == 200
        assert backend_a.requests[0].body["model"] == "anything"
        async with http.get(proxy.endpoint + "/models") as r:
            assert (await r.json())["data"] == []


async def test_unknown_paths_and_wrong_methods_get_json_errors(
    proxy: LLMProxy, http: aiohttp.ClientSession
) -> None:
    async with http.get(proxy.endpoint + "/embeddings") as response:
        assert response.status == 404
        assert _is_openai_error(await response.json())
    async with http.get(proxy.endpoint + "/chat/completions") as response:
        assert response.status == 405
        body = await response.json()
    assert _is_openai_error(body) and "POST" in body["error"]["message"]


async def test_request_body_over_the_limit_is_413(
    backend_a: FakeOpenAIServer, http: aiohttp.ClientSession
) -> None:
    async with (
        LLMProxy({"m": backend_a.base_url}, max_request_bytes=2048) as proxy,
        http.post(proxy.endpoint + "/chat/completions", json=chat("x" * 4096)) as response,
    ):
        assert response.status == 413
        body = await response.json()
    assert _is_openai_error(body) and body["error"]["code"] == "request_too_large"
    assert "2048" in body["error"]["message"]
    assert backend_a.requests == []


async def test_backend_response_over_the_limit_is_502(
    backend_a: FakeOpenAIServer, http: aiohttp.ClientSession
) -> None:
    async with (
        LLMProxy({"m": backend_a.base_url}, max_response_bytes=1024) as proxy,
        http.post(proxy.endpoint + "/chat/completions", json=chat("word " * 300)) as response,
    ):
        assert response.status == 502
        body = await response.json()
    assert _is_openai_error(body) and body["error"]["code"] == "response_too_large"


async def test_bearer_token_is_enforced(backend_a: FakeOpenAIServer, http: aiohttp.ClientSession) -> None:
    async with LLMProxy({"m": backend_a.base_url}, token="s3cret") as proxy:
        url = proxy.endpoint + "/chat/completions"
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            async with http.post(url, json=chat("x"), headers=headers) as response:
                assert response.status == 401
                body = await response.json()
            assert _is_openai_error(body) and body["error"]["code"] == "invalid_api_key"
        async with http.get(proxy.endpoint + "/models") as response:
            assert response.status == 401
        async with http.post(url, json=chat("x"), headers={"Authorization": "Bearer s3cret"}) as response:
            assert response.status == 200
        async with http.get(proxy.endpoint.removesuffix("/v1") + "/health") as response:
            assert response.status == 200 and (await response.json()) == {"status": "ok"}
        assert proxy.as_resource().api_key == "s3cret"
    # the caller's token is never forwarded to the backend
    assert len(backend_a.requests) == 1
    assert "Authorization" not in backend_a.requests[0].headers


async def test_backend_api_key_is_sent_upstream_and_never_exposed(
    backend_a: FakeOpenAIServer, http: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    from agl_core.llm_proxy import HttpBackend

    secret = "sk-very-secret-key"
    caplog.set_level("DEBUG", logger="agl_core")
    backend = HttpBackend(backend_a.base_url, api_key=secret)
    async with LLMProxy({"m": backend}) as proxy:
        async with http.post(proxy.endpoint + "/chat/completions", json=chat("x")) as response:
            assert response.status == 200
        shown = repr(backend) + repr(proxy) + str(proxy.stats())
    assert backend_a.requests[0].headers["Authorization"] == f"Bearer {secret}"
    assert secret not in shown
    assert secret not in caplog.text


async def test_models_route_lists_configured_models(
    backend_a: FakeOpenAIServer, backend_b: FakeOpenAIServer, http: aiohttp.ClientSession
) -> None:
    async with LLMProxy({"policy": backend_a.base_url, "judge": backend_b.base_url}) as proxy:
        for url in (
            proxy.endpoint + "/models",
            proxy.as_resource("ro-1", "at-1", model="policy").endpoint + "/models",
        ):
            async with http.get(url) as response:
                body = await response.json()
            assert body["object"] == "list"
            assert [m["id"] for m in body["data"]] == ["policy", "judge"]
