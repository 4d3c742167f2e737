"""In-process backends: Python objects serving a model through the proxy (how samplers reach agents)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from agl_core.llm_proxy import InProcessBackend, LLMProxy, ProxyHTTPError
from agl_core.store.memory import InMemoryLightningStore
from agl_testing.fake_openai import FakeTokenizer, render_chat_prompt
from tests.llm_proxy.conftest import Rollout, chat, sse_chunks


class UpperSampler:
    """A tiny sampler: answers the last user message in upper case, with token ids and logprobs."""

    name = "upper-sampler"

    def __init__(self) -> None:
        self.tokenizer = FakeTokenizer()
        self.seen: list[dict[str, Any]] = []

    def _answer(self, request: dict[str, Any]) -> tuple[list[int], list[int], str]:
        self.seen.append(request)
        text = request["messages"][-1]["content"]
        if text == "refuse":
            raise ProxyHTTPError(400, "This sampler refuses.", code="refused", param="messages")
        if text == "crash":
            raise RuntimeError("sampler exploded")
        reply = text.upper()
        return (
            self.tokenizer.encode(render_chat_prompt(request["messages"])),
            self.tokenizer.encode(reply),
            reply,
        )

    async def chat_completions(self, request: dict[str, Any]) -> dict[str, Any]:
        prompt_ids, ids, reply = self._answer(request)
        return {
            "id": f"upper-{len(self.seen)}",
            "object": "chat.completion",
            "created": 0,
            "model": request["model"],
            "prompt_token_ids": prompt_ids,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply},
                    "finish_reason": "stop",
                    "token_ids": ids,
                    "logprobs": {
                        "content": [{"token": str(t), "logprob": -0.5, "top_logprobs": []} for t in ids]
                    },
                }
            ],
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(ids), "total_tokens": 0},
        }


class StreamingUpperSampler(UpperSampler):
    """Adds a native stream: one chunk per token."""

    async def stream_chat_completions(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        prompt_ids, ids, _ = self._answer(request)
        head = {
            "id": "upper-stream",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": request["model"],
        }
        yield {
            **head,
            "prompt_token_ids": prompt_ids,
            "choices": [{"index": 0, "delta": {"role": "assistant"}}],
        }
        for token in ids:
            piece = self.tokenizer.decode([token])
            yield {**head, "choices": [{"index": 0, "delta": {"content": piece}, "token_ids": [token]}]}
        yield {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


def test_samplers_satisfy_the_protocol() -> None:
    assert isinstance(UpperSampler(), InProcessBackend)
    assert not isinstance(object(), InProcessBackend)


@pytest.mark.parametrize("stream", [False, True])
async def test_in_process_backend_answers_and_is_recorded_exactly(
    store: InMemoryLightningStore, rollout: Rollout, http: aiohttp.ClientSession, stream: bool
) -> None:
    sampler = UpperSampler()
    async with LLMProxy({"local": sampler}, store=store) as proxy:
        llm = proxy.as_resource(rollout.rollout_id, rollout.attempt_id)
        assert llm.model == "local"
        body = {**chat("make me loud", stream=stream), "model": "local"}
        async with http.post(llm.endpoint + "/chat/completions", json=body) as response:
            assert response.status == 200
            raw = await response.text()
        assert await proxy.flush(timeout=5)
        [span] = await store.query_spans(rollout.rollout_id)
    expected_ids = FakeTokenizer().encode("MAKE ME LOUD")
    if stream:  # no native stream: the answer is re-emitted as SSE, ids included
        chunks = sse_chunks(raw)
        assert (
            "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
            == "MAKE ME LOUD"
        )
        assert [t for c in chunks for ch in c["choices"] for t in ch.get("token_ids", [])] == expected_ids
        assert span.attributes["agl.llm.stream_synthesized"] is True
    else:
        assert json.loads(raw)["choices"][0]["token_ids"] == expected_ids
    assert sampler.seen[0] == body  # the agent's request, untouched
    assert span.attributes["response_token_ids"] == expected_ids
    assert span.attributes["prompt_token_ids"] == FakeTokenizer().encode(render_chat_prompt(body["messages"]))
    assert span.attributes["agl.llm.backend"] == "upper-sampler"
    assert len(json.loads(span.attributes["logprobs.content"])) == len(expected_ids)


async def test_native_in_process_stream_is_passed_through_and_assembled(
    store: InMemoryLightningStore, rollout: Rollout, http: aiohttp.ClientSession
) -> None:
    async with LLMProxy({"local": StreamingUpperSampler()}, store=store) as proxy:
        url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint + "/chat/completions"
        async with http.post(url, json={**chat("a b c", stream=True), "model": "local"}) as response:
            chunks = sse_chunks(await response.text())
        assert await proxy.flush(timeout=5)
        [span] = await store.query_spans(rollout.rollout_id)
    assert len(chunks) == 2 + len(FakeTokenizer().encode("A B C"))
    assert span.attributes["response_token_ids"] == FakeTokenizer().encode("A B C")
    assert "agl.llm.stream_synthesized" not in span.attributes
    assert json.loads(span.attributes["gen_ai.output.messages"])[0]["parts"][0]["content"] == "A B C"


async def test_in_process_errors_become_openai_errors(
    store: InMemoryLightningStore, rollout: Rollout, http: aiohttp.ClientSession
) -> None:
    async with LLMProxy({"local": UpperSampler()}, store=store) as proxy:
        url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint
        async with http.post(
            url + "/chat/completions", json={**chat("refuse"), "model": "local"}
        ) as response:
            assert response.status == 400
            refused = (await response.json())["error"]
        async with http.post(url + "/chat/completions", json={**chat("crash"), "model": "local"}) as response:
            assert response.status == 500
            crashed = (await response.json())["error"]
        async with http.post(url + "/completions", json={"model": "local", "prompt": "x"}) as response:
            assert response.status == 404
            unsupported = (await response.json())["error"]
        assert await proxy.flush(timeout=5)
        spans = list(await store.query_spans(rollout.rollout_id))
    assert refused == {
        "message": "This sampler refuses.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "refused",
    }
    assert crashed["code"] == "backend_error" and "sampler exploded" in crashed["message"]
    assert unsupported["code"] == "operation_not_supported"
    assert [s.status.status_code for s in spans] == ["ERROR"] * 3


async def test_pools_cannot_mix_http_and_in_process_backends() -> None:
    from agl_core.llm_proxy import BackendConfigError

    with pytest.raises(BackendConfigError, match="mixes HTTP and in-process"):
        LLMProxy({"m": ["http://127.0.0.1:1/v1", UpperSampler()]})


class FailingStreamSampler(UpperSampler):
    """Streams one chunk, then fails."""

    async def stream_chat_completions(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        yield {"id": "f", "choices": [{"index": 0, "delta": {"content": "half"}, "token_ids": [5]}]}
        raise RuntimeError("sampler lost its GPU")


async def test_a_native_stream_failing_midway_ends_with_an_error_event(
    store: InMemoryLightningStore, rollout: Rollout, http: aiohttp.ClientSession
) -> None:
    async with LLMProxy({"local": FailingStreamSampler()}, store=store) as proxy:
        url = proxy.as_resource(rollout.rollout_id, rollout.attempt_id).endpoint + "/chat/completions"
        async with http.post(url, json={**chat("x", stream=True), "model": "local"}) as response:
            assert response.status == 200
            text = await response.text()
        assert await proxy.flush(timeout=5)
        [span] = await store.query_spans(rollout.rollout_id)
    chunks = sse_chunks(text)
    assert chunks[0]["choices"][0]["delta"]["content"] == "half"
    assert chunks[-1]["error"]["code"] == "backend_error" and "lost its GPU" in chunks[-1]["error"]["message"]
    assert "[DONE]" not in text
    assert span.status.status_code == "ERROR" and span.attributes["response_token_ids"] == [5]
