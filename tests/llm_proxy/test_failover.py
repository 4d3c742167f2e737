"""Robustness: failover to another replica, error pass-through, timeouts."""

from __future__ import annotations

import asyncio
import json

import aiohttp

from agl_core.llm_proxy import LLMProxy
from agl_core.store.memory import InMemoryLightningStore
from agl_testing.fake_openai import FakeOpenAIServer, Fault
from tests.llm_proxy.conftest import Rollout, chat


async def test_a_backend_killed_mid_run_fails_over_to_the_other(
    store: InMemoryLightningStore, rollout: Rollout, http: aiohttp.ClientSession
) -> None:
    async with FakeOpenAIServer() as survivor:
        victim = FakeOpenAIServer()
        await victim.start()
        victim_url = victim.base_url
        async with LLMProxy({"m": [victim_url, survivor.base_url]}, store=store) as proxy:
            url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint + "/chat/completions"

            async def call(n: int) -> str:
                async with http.post(url, json=chat(f"request {n}")) as response:
                    assert response.status == 200, await response.text()
                    return (await response.json())["choices"][0]["message"]["content"]

            before = await asyncio.gather(*(call(n) for n in range(20)))
            served_by_victim = len(victim.requests)
            assert served_by_victim > 0
            await victim.stop()  # killed: its port now refuses connections
            after = await asyncio.gather(*(call(n) for n in range(20, 60)))
            assert before + after == [f"request {n}" for n in range(60)]
            assert await proxy.flush(timeout=10)
            stats = proxy.stats()
        assert len(victim.requests) == served_by_victim
        assert len(survivor.requests) == 60 - served_by_victim
        assert stats["retries"] >= 1
        victim_stats = next(b for b in stats["backends"]["m"] if b["backend"] == victim_url)
        assert victim_stats["failures"] >= 1 and victim_stats["healthy"] is False
        spans = list(await store.query_spans(rollout.rollout_id))
        assert len(spans) == 60 and all(s.status.status_code == "OK" for s in spans)
        assert sum(s.attributes["agl.llm.attempts"] for s in spans) == 60 + stats["retries"]


async def test_a_connection_dropped_by_the_backend_is_retried_on_the_other_replica(
    proxy: LLMProxy, backend_a: FakeOpenAIServer, backend_b: FakeOpenAIServer, http: aiohttp.ClientSession
) -> None:
    backend_a.fail_next(Fault(drop_connection=True))
    backend_b.fail_next(Fault(drop_connection=True))
    # the first try lands on a or b and is dropped; the retry goes to the other one, which drops it too;
    # a third try (max_retries=2) reaches a healthy replica again.
    async with http.post(proxy.endpoint + "/chat/completions", json=chat("persist")) as response:
        assert response.status == 200
        assert (await response.json())["choices"][0]["message"]["content"] == "persist"
    assert proxy.stats()["retries"] == 2


async def test_all_replicas_down_gives_502_with_an_openai_error(
    store: InMemoryLightningStore, rollout: Rollout, http: aiohttp.ClientSession
) -> None:
    dead = [FakeOpenAIServer(), FakeOpenAIServer()]
    for server in dead:
        await server.start()
    urls = [server.base_url for server in dead]
    for server in dead:
        await server.stop()
    async with LLMProxy({"m": urls}, store=store) as proxy:
        url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint + "/chat/completions"
        async with http.post(url, json=chat("anyone?")) as response:
            assert response.status == 502
            error = (await response.json())["error"]
        assert error["code"] == "backend_unavailable" and error["type"] == "server_error"
        assert "'m'" in error["message"]
        assert await proxy.flush(timeout=5)
        [span] = await store.query_spans(rollout.rollout_id)
    assert span.status.status_code == "ERROR"
    assert span.attributes["error.type"] == "backend_unavailable"
    assert span.attributes["http.response.status_code"] == 502


async def test_backend_http_errors_are_passed_through_without_retry(
    store: InMemoryLightningStore,
    rollout: Rollout,
    backend_a: FakeOpenAIServer,
    backend_b: FakeOpenAIServer,
    http: aiohttp.ClientSession,
) -> None:
    faults = [Fault(status=s, message=f"scripted {s}") for s in (400, 429, 500)]
    backend_a.fail_next(*faults)
    backend_b.fail_next(*faults)
    async with LLMProxy({"m": [backend_a.base_url, backend_b.base_url]}, store=store) as proxy:
        url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint + "/chat/completions"
        got = []
        for _ in range(6):  # round robin: each backend answers its three faults in order
            async with http.post(url, json=chat("x")) as response:
                got.append((response.status, (await response.json())["error"]))
        assert proxy.stats()["retries"] == 0
        assert await proxy.flush(timeout=5)
        spans = list(await store.query_spans(rollout.rollout_id))
    kinds = {400: "invalid_request_error", 429: "invalid_request_error", 500: "server_error"}
    assert sorted(status for status, _ in got) == [400, 400, 429, 429, 500, 500]
    for status, error in got:
        assert error == {"message": f"scripted {status}", "type": kinds[status], "param": None, "code": None}
    assert len(backend_a.requests) == len(backend_b.requests) == 3  # each error answered once, never retried
    assert sorted(s.attributes["http.response.status_code"] for s in spans) == [400, 400, 429, 429, 500, 500]
    assert all(s.status.status_code == "ERROR" and s.status.description.startswith("scripted") for s in spans)


async def test_streaming_errors_from_the_backend_are_json_not_sse(
    proxy: LLMProxy, backend_a: FakeOpenAIServer, backend_b: FakeOpenAIServer, http: aiohttp.ClientSession
) -> None:
    backend_a.fail_next(Fault(status=503, message="overloaded"))
    backend_b.fail_next(Fault(status=503, message="overloaded"))
    async with http.post(proxy.endpoint + "/chat/completions", json=chat("x", stream=True)) as response:
        assert response.status == 503
        assert response.headers["Content-Type"].startswith("application/json")
        assert (await response.json())["error"]["message"] == "overloaded"


async def test_a_slow_backend_times_out_with_504(
    store: InMemoryLightningStore, http: aiohttp.ClientSession
) -> None:
    async with (
        FakeOpenAIServer() as slow,
        LLMProxy({"m": slow.base_url}, store=store, request_timeout=0.2) as proxy,
    ):
        slow.fail_next(Fault(delay_s=1.0, status=500))
        async with http.post(proxy.endpoint + "/chat/completions", json=chat("x")) as response:
            assert response.status == 504
            error = (await response.json())["error"]
        assert error["code"] == "backend_timeout"
        assert proxy.stats()["retries"] == 0  # the backend may still be generating: no retry


async def test_vllm_style_flat_errors_are_normalized(http: aiohttp.ClientSession) -> None:
    from aiohttp import web

    async def vllm_error(request: web.Request) -> web.Response:
        body = {
            "object": "error",
            "message": "context too long",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
        return web.json_response(body, status=400)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", vllm_error)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with (
            LLMProxy({"m": f"http://127.0.0.1:{port}"}) as proxy,
            http.post(proxy.endpoint + "/chat/completions", json=chat("x")) as response,
        ):
            assert response.status == 400
            body = json.loads(await response.text())
    finally:
        await runner.cleanup()
    assert body == {
        "error": {"message": "context too long", "type": "BadRequestError", "param": None, "code": 400}
    }


async def test_a_stream_that_breaks_off_is_ended_with_an_error_event_and_not_retried(
    store: InMemoryLightningStore, rollout: Rollout, backend_b: FakeOpenAIServer, http: aiohttp.ClientSession
) -> None:
    from aiohttp import web

    hits = []

    async def crashing_stream(request: web.Request) -> web.StreamResponse:
        hits.append(request.path)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        head = {"id": "s1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
        await response.write(
            b"data: "
            + json.dumps(
                {
                    **head,
                    "prompt_token_ids": [1, 2],
                    "choices": [
                        {"index": 0, "delta": {"role": "assistant", "content": "par"}, "token_ids": [7]}
                    ],
                }
            ).encode()
            + b"\n\n"
        )
        await response.write(b'data: {"id": "s1", "choi')  # the model server dies mid-event
        assert request.transport is not None
        request.transport.abort()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", crashing_stream)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    crashing = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    try:
        async with LLMProxy({"m": [crashing, backend_b.base_url]}, store=store) as proxy:
            url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint + "/chat/completions"
            async with http.post(url, json=chat("x", stream=True)) as response:
                assert response.status == 200
                text = await response.text()
            assert await proxy.flush(timeout=5)
            stats = proxy.stats()
    finally:
        await runner.cleanup()
    events = [json.loads(block[5:]) for block in text.split("\n\n") if block.startswith("data: {")]
    assert events[0]["choices"][0]["delta"]["content"] == "par"
    assert events[-1]["error"]["code"] == "stream_interrupted"
    assert hits == ["/v1/chat/completions"] and backend_b.requests == []  # never retried once streaming
    assert stats["retries"] == 0
    [span] = await store.query_spans(rollout.rollout_id)
    assert span.status.status_code == "ERROR" and "broke off" in span.status.description
    assert span.attributes["response_token_ids"] == [7] and span.attributes["prompt_token_ids"] == [1, 2]


async def test_an_agent_leaving_mid_stream_is_recorded_and_frees_the_backend(
    store: InMemoryLightningStore, rollout: Rollout
) -> None:
    from aiohttp import web

    async def slow_stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for n in range(200):
            chunk = {"id": "s", "choices": [{"index": 0, "delta": {"content": f"{n} "}, "token_ids": [n]}]}
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            await asyncio.sleep(0.01)
        await response.write(b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", slow_stream)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        async with LLMProxy({"m": f"http://127.0.0.1:{runner.addresses[0][1]}/v1"}, store=store) as proxy:
            url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint + "/chat/completions"
            async with aiohttp.ClientSession() as http:
                response = await http.post(url, json=chat("x", stream=True))
                assert (await response.content.readline()).startswith(b"data: ")
                response.close()  # the agent goes away after the first event
            assert await proxy.flush(timeout=10)
            [replica] = proxy.stats()["backends"]["m"]
    finally:
        await runner.cleanup()
    assert replica["in_flight"] == 0
    [span] = await store.query_spans(rollout.rollout_id)
    assert span.status.status_code == "ERROR" and span.attributes["error.type"] == "agent_disconnected"
    assert 0 < len(span.attributes["response_token_ids"]) < 200
