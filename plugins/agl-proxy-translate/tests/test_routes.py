"""The translated routes keep the proxy's guarantees: malformed bodies get a 400 in the API's shape and an
answered call with a NaN parameter is recorded (the parameter as null)."""

from __future__ import annotations

import json

import aiohttp
import pytest

from agl_core.llm_proxy import LLMProxy
from agl_core.store.memory import InMemoryLightningStore
from agl_testing.fake_openai import FakeOpenAIServer

ROUTES = ("/responses", "/messages")
JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"model": "m", "input": ' + b'{"a":' * 300 + b"1" + b"}" * 300 + b"}",
        b"\xff\xfe\x00",
        b'{"model": "m", "messages": [',
        b"[1, 2]",
        b'{"model": NaN}',
        b'{"model": "m"}',
        b"",
    ],
    ids=["deep-array", "deep-object-300", "not-utf8", "truncated", "not-object", "nan", "no-input", "empty"],
)
async def test_every_malformed_body_gets_a_json_400_in_the_routes_shape(
    proxy: LLMProxy, http: aiohttp.ClientSession, body: bytes
) -> None:
    for route in ROUTES:
        async with http.post(proxy.endpoint + route, data=body, headers=JSON) as response:
            assert response.status == 400, (route, await response.text())
            answer = await response.json()
        error = answer["error"]
        assert isinstance(error["message"], str) and error["message"]
        if route == "/messages":
            assert answer["type"] == "error" and error["type"] == "invalid_request_error"


async def test_a_nan_parameter_on_messages_is_recorded_as_null(
    backend_a: FakeOpenAIServer, http: aiohttp.ClientSession
) -> None:
    store = InMemoryLightningStore()
    started = await store.start_rollout(input=1)
    body = (
        '{"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}], "temperature": NaN}'
    )
    async with LLMProxy({"m": backend_a.base_url}, store=store) as proxy:
        url = proxy.as_resource(started.rollout_id, started.attempt.attempt_id).endpoint + "/messages"
        async with http.post(url, data=body, headers=JSON) as response:
            assert response.status == 200, await response.text()
        assert await proxy.flush(timeout=10)
        stats = proxy.stats()
    assert stats["spans_failed"] == 0 and stats["spans_written"] == 1
    (span,) = (await store.query_spans(started.rollout_id)).items
    assert span.attributes["agl.llm.client_api"] == "anthropic.messages"
    assert json.loads(span.attributes["agl.llm.request.parameters"])["temperature"] is None
