"""A call the proxy answered is always recorded (issue 34): NaN parameters and oversized answers."""

from __future__ import annotations

import json
import re

import aiohttp
import pytest

from agl_core.llm_proxy import LLMProxy
from agl_core.llm_proxy.recording import MAX_RECORDED_TEXT_CHARS
from agl_core.store.http import BackgroundServer, LightningStoreClient
from agl_core.store.memory import InMemoryLightningStore
from agl_testing.fake_openai import FakeOpenAIServer

BODIES = {
    "/chat/completions": '{"model": "m", "messages": [{"role": "user", "content": "hi"}], '
    '"temperature": NaN}',
    "/completions": '{"model": "m", "prompt": "hi", "temperature": NaN, "top_p": Infinity}',
}


@pytest.mark.parametrize("route", sorted(BODIES))
async def test_a_nan_parameter_is_recorded_as_null(
    backend_a: FakeOpenAIServer, http: aiohttp.ClientSession, route: str
) -> None:
    store = InMemoryLightningStore()
    started = await store.start_rollout(input=1)
    async with LLMProxy({"m": backend_a.base_url}, store=store) as proxy:
        url = proxy.as_resource(started.rollout_id, started.attempt.attempt_id).endpoint + route
        headers = {"Content-Type": "application/json"}
        async with http.post(url, data=BODIES[route], headers=headers) as response:
            assert response.status == 200, await response.text()
        assert await proxy.flush(timeout=10)
        stats = proxy.stats()
    assert stats["spans_failed"] == 0 and stats["spans_written"] == 1
    (span,) = (await store.query_spans(started.rollout_id)).items
    assert "gen_ai.request.temperature" not in span.attributes
    parameters = span.attributes["agl.llm.request.parameters"]
    assert "NaN" not in parameters and "Infinity" not in parameters
    assert json.loads(parameters)["temperature"] is None


async def test_an_answer_larger_than_the_store_takes_is_recorded_truncated(
    http: aiohttp.ClientSession,
) -> None:
    content = "x" * (5 * 1024 * 1024 + 512 * 1024)  # with its logprobs the answer is about 40 MiB
    with BackgroundServer(InMemoryLightningStore) as server:  # the default 32 MiB body limit
        store = LightningStoreClient(server.endpoint)
        started = await store.start_rollout(input=1)
        async with (
            FakeOpenAIServer([content]) as backend,
            LLMProxy({"m": backend.base_url}, store=store) as proxy,
        ):
            url = proxy.as_resource(started.rollout_id, started.attempt.attempt_id).endpoint
            body = {"model": "m", "messages": [{"role": "user", "content": "long"}]}
            async with http.post(url + "/chat/completions", json=body) as response:
                assert response.status == 200, await response.text()
                answer = await response.read()
                assert len(answer) > 36 * 1024 * 1024
                assert len(json.loads(answer)["choices"][0]["message"]["content"]) == len(content)
            assert await proxy.flush(timeout=60)
            stats = proxy.stats()
        (span,) = (await store.query_spans(started.rollout_id)).items
        await store.close()
    assert stats["spans_failed"] == 0 and stats["spans_written"] == 1
    output = span.attributes["gen_ai.output.messages"]
    marker = re.search(r"…\[truncated by the LLM proxy: kept (\d+) of (\d+) characters\]$", output)
    assert marker is not None, output[-200:]
    assert int(marker.group(2)) > len(content) and output.startswith('[{"role":"assistant"')
    assert span.attributes["agl.llm.truncated"] == ["gen_ai.output.messages", "logprobs.content"]
    texts = [value for value in span.attributes.values() if isinstance(value, str)]
    assert sum(map(len, texts)) <= MAX_RECORDED_TEXT_CHARS
