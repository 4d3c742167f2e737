"""Proxy hardening (issue 20): malformed bodies, cross-site requests, abandoned requests, configs, logs."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
import pytest

from agl_core.llm_proxy import BackendConfigError, HttpBackend, LLMProxy
from agl_core.utils.http_guard import LogLimiter
from agl_testing.fake_openai import FakeOpenAIServer

ROUTES = ("/chat/completions", "/completions")
JSON = {"Content-Type": "application/json"}


async def _wait_until(condition: Any, timeout: float = 15.0) -> None:
    """Poll ``condition`` until it holds (bounded): the proxy reacts to disconnects asynchronously."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"model": "m", "messages": ' + b"[" * 5_000 + b"]" * 5_000 + b"}",
        b'{"model": "m", "input": ' + b'{"a":' * 300 + b"1" + b"}" * 300 + b"}",
        b"\xff\xfe\x00",
        b'{"model": "m", "messages": [',
        b"[1, 2]",
        b'{"model": NaN}',
        b"",
    ],
    ids=[
        "deep-array",
        "deep-messages",
        "deep-object-300",
        "not-utf8",
        "truncated",
        "not-object",
        "nan",
        "empty",
    ],
)
async def test_every_malformed_body_gets_a_json_400_on_every_route(
    proxy: LLMProxy, http: aiohttp.ClientSession, body: bytes
) -> None:
    for route in ROUTES:
        async with http.post(proxy.endpoint + route, data=body, headers=JSON) as response:
            assert response.status == 400, (route, await response.text())
            answer = await response.json()
        error = answer["error"]
        assert isinstance(error["message"], str) and error["message"]


async def test_post_routes_accept_only_json_bodies(proxy: LLMProxy, http: aiohttp.ClientSession) -> None:
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    for content_type in (
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        None,
    ):
        headers = {"Content-Type": content_type} if content_type else {}
        async with http.post(proxy.endpoint + "/chat/completions", data=body, headers=headers) as response:
            assert response.status == 415, content_type
            assert (await response.json())["error"]["code"] == "unsupported_media_type"
    for content_type in ("application/json", "application/json; charset=utf-8"):
        async with http.post(
            proxy.endpoint + "/chat/completions", data=body, headers={"Content-Type": content_type}
        ) as response:
            assert response.status == 200


async def test_foreign_origins_and_unknown_host_names_are_refused(
    backend_a: FakeOpenAIServer, http: aiohttp.ClientSession
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    async with LLMProxy({"m": backend_a.base_url}) as proxy:
        url = proxy.endpoint + "/chat/completions"
        port = url.split(":")[2].split("/")[0]
        async with http.post(url, json=body, headers={"Origin": "https://evil.example"}) as response:
            assert response.status == 403 and "Access-Control-Allow-Origin" not in response.headers
            assert (await response.json())["error"]["code"] == "origin_not_allowed"
        async with http.get(proxy.endpoint + "/models", headers={"Origin": "null"}) as response:
            assert response.status == 403
        for host in (f"rebind.evil.example:{port}", "attacker.test"):
            async with http.post(url, json=body, headers={"Host": host}) as response:
                assert response.status == 403, host
                assert (await response.json())["error"]["code"] == "host_not_allowed"
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "10.1.2.3"):
            async with http.post(url, json=body, headers={"Host": host}) as response:
                assert response.status == 200, host
        async with http.options(url, headers={"Origin": "https://evil.example"}) as response:
            assert response.status == 403
    async with LLMProxy(
        {"m": backend_a.base_url}, allowed_origins=["https://app.example"], allowed_hosts=["svc.cluster"]
    ) as proxy:
        url = proxy.endpoint + "/chat/completions"
        async with http.post(
            url, json=body, headers={"Origin": "https://app.example", "Host": "svc.cluster"}
        ) as response:
            assert response.status == 200
            assert response.headers["Access-Control-Allow-Origin"] == "https://app.example"
            assert "Access-Control-Allow-Credentials" not in response.headers
        preflight = {
            "Origin": "https://app.example",
            "Access-Control-Request-Headers": "authorization, content-type",
        }
        async with http.options(url, headers=preflight) as response:
            assert response.status == 204
            assert response.headers["Access-Control-Allow-Origin"] == "https://app.example"
            assert "Access-Control-Allow-Credentials" not in response.headers
        async with http.post(url, json=body, headers={"Origin": "https://other.example"}) as response:
            assert response.status == 403
    async with (
        LLMProxy({"m": backend_a.base_url}, allowed_origins=["*"]) as proxy,
        http.post(
            proxy.endpoint + "/chat/completions", json=body, headers={"Origin": "https://any.example"}
        ) as response,
    ):
        assert response.status == 200
        assert response.headers["Access-Control-Allow-Origin"] == "*"  # never the echoed origin
        assert "Access-Control-Allow-Credentials" not in response.headers
    async with LLMProxy({"m": backend_a.base_url}, access_host="node-7.cluster") as proxy:
        url = proxy.endpoint.replace("node-7.cluster", "127.0.0.1") + "/chat/completions"
        async with http.post(url, json=body, headers={"Host": "node-7.cluster"}) as response:
            assert response.status == 200  # the name agents are given is always accepted
    async with LLMProxy({"m": backend_a.base_url}, token="tok") as proxy:
        headers = {"Host": "proxy.compose", "Authorization": "Bearer tok"}
        async with http.post(proxy.endpoint + "/chat/completions", json=body, headers=headers) as response:
            assert response.status == 200  # with a token, a rebinding page cannot get in: any name works


async def test_abandoned_requests_are_cancelled_at_the_backend() -> None:
    async with FakeOpenAIServer(latency_s=120) as backend, LLMProxy({"m": backend.base_url}) as proxy:
        url = proxy.endpoint + "/chat/completions"
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:

            async def ask(n: int) -> None:
                body = {
                    "model": "m",
                    "messages": [{"role": "user", "content": f"slow {n}"}],
                    "stream": n % 2 == 0,
                }
                async with http.post(url, json=body) as response:
                    await response.read()

            clients = [asyncio.create_task(ask(n)) for n in range(40)]
            await _wait_until(lambda: len(backend.requests) == 40)
            assert backend.open_connections == 40
            for client in clients:
                client.cancel()
            await asyncio.gather(*clients, return_exceptions=True)
        # the 40 agents are gone: their backend requests must end long before the backend's 120 s
        await _wait_until(lambda: sum(r["in_flight"] for r in proxy.stats()["backends"]["m"]) == 0)
        await _wait_until(lambda: backend.open_connections == 0)


async def test_invalid_backend_configs_are_refused_when_set(backend_a: FakeOpenAIServer) -> None:
    bad: list[dict[str, Any]] = [
        {"url": "http://user:pw@h/v1", "api_key": "k"},
        {"url": "http://user:pw@h/v1", "headers": {"Authorization": "Bearer x"}},
        {"url": "http://h/v1", "api_key": "line\nbreak"},
        {"url": "http://h/v1", "api_key": ""},
        {"url": "http://h/v1", "headers": {"Bad Name": "1"}},
        {"url": "http://h/v1", "headers": {"X-Key": "a\r\nInjected: 1"}},
        {"url": "http://h/v1", "streaming": "yes"},
        {"url": "http://h/v1", "model": ""},
        {"url": "unix:///tmp/sock"},
    ]
    for fields in bad:
        with pytest.raises(BackendConfigError):
            HttpBackend(**fields)
        with pytest.raises(BackendConfigError):
            LLMProxy({"m": fields})
    assert "pw" not in repr(HttpBackend("http://user:pw@h/v1"))
    async with LLMProxy({"m": backend_a.base_url}) as proxy:
        with pytest.raises(BackendConfigError):
            proxy.update_backends({"m": {"url": backend_a.base_url, "api_key": "a\nb"}})
        assert proxy.model_names() == ["m"]


async def test_the_bearer_scheme_is_case_insensitive(
    backend_a: FakeOpenAIServer, http: aiohttp.ClientSession
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    async with LLMProxy({"m": backend_a.base_url}, token="tok") as proxy:
        url = proxy.endpoint + "/chat/completions"
        for header in (
            {"Authorization": "Bearer tok"},
            {"Authorization": "bearer tok"},
            {"Authorization": "BEARER  tok"},
            {"x-api-key": "tok"},
        ):
            async with http.post(url, json=body, headers=header) as response:
                assert response.status == 200, header
        for header in ({"Authorization": "Basic tok"}, {"Authorization": "Bearer nope"}, {}):
            async with http.post(url, json=body, headers=header) as response:
                assert response.status == 401, header


class _Broken:
    async def chat_completions(self, request: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("sampler is broken")


async def test_a_flood_of_identical_failures_logs_a_bounded_number_of_lines(
    http: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with caplog.at_level(logging.WARNING, logger="agl_core.llm_proxy"):
        async with LLMProxy({"m": _Broken()}) as proxy:
            for _ in range(60):
                async with http.post(proxy.endpoint + "/chat/completions", json=body) as response:
                    assert response.status == 500
    failures = [
        r for r in caplog.records if "sampler is broken" in str(r.exc_info) or "failed" in r.getMessage()
    ]
    assert 1 <= len(failures) <= 3


def test_the_log_limiter_reports_what_it_suppressed() -> None:
    now = [0.0]
    limiter = LogLimiter(interval=10, burst=2, clock=lambda: now[0])
    assert [limiter.allow("k") for _ in range(5)] == [0, 0, None, None, None]
    assert limiter.allow("other") == 0
    now[0] = 10.5
    assert limiter.allow("k") == 3  # the first record of a new window says how many were dropped
    assert limiter.allow("k") == 0
