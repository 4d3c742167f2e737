"""The LLM proxy picks a backend only by a configured model name, never by a target a request names."""

from __future__ import annotations

import aiohttp
import pytest

from agl_core.llm_proxy import LLMProxy


@pytest.mark.parametrize("model", ["os:getpid", "os.abort", "sys:exit"])
async def test_a_target_as_model_is_refused_with_the_served_names(
    proxy: LLMProxy, http: aiohttp.ClientSession, model: str
) -> None:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    async with http.post(proxy.endpoint + "/chat/completions", json=body) as response:
        status, answer = response.status, await response.json()
    assert status == 404, answer
    assert answer["error"]["code"] == "model_not_found"
    assert "available models: ['m']" in answer["error"]["message"]
