"""`OptimizerLLM` against a fake OpenAI server: retries, timeouts, temperature handling, preflight."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agl_apo.optimizer import (
    OptimizerConfigError,
    OptimizerError,
    OptimizerLLM,
    OptimizerUnreachableError,
    rejects_temperature,
)
from agl_testing.fake_openai import FakeOpenAIServer, Fault, Reply

MESSAGES = [{"role": "user", "content": "hello"}]
TEMPERATURE_ERROR = (
    "Unsupported value: 'temperature' does not support 0.7 with this model. Only 1 is supported."
)


class Sleeps:
    """Records the backoff delays instead of waiting them out."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def _strict_models(request: dict[str, Any]) -> Reply | Fault:
    """Models named strict-* answer 400 to any temperature, like reasoning models do."""
    if str(request.get("model", "")).startswith("strict") and "temperature" in request:
        return Fault(status=400, message=TEMPERATURE_ERROR)
    return Reply(content=f"reply from {request.get('model')}")


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(_strict_models, models=["critic"]) as fake:
        yield fake


def _chat_bodies(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.path.endswith("/chat/completions")]


async def _llm(server: FakeOpenAIServer, sleeps: Sleeps | None = None, **kwargs: Any) -> OptimizerLLM:
    return OptimizerLLM(
        base_url=server.base_url, api_key="k", sleep=sleeps or Sleeps(), backoff_initial=0.5, **kwargs
    )


async def test_rate_limits_are_retried_with_growing_backoff(server: FakeOpenAIServer) -> None:
    sleeps = Sleeps()
    llm = await _llm(server, sleeps, max_retries=5)
    server.fail_next(Fault(status=429, message="Rate limit reached"), Fault(status=429, message="slow down"))
    try:
        assert await llm.chat("critic", MESSAGES, temperature=0.7) == "reply from critic"
    finally:
        await llm.aclose()
    assert len(_chat_bodies(server)) == 3
    assert llm.usage.retries == 2 and llm.usage.calls == 1
    assert 0.25 <= sleeps.delays[0] <= 0.5 and 0.5 <= sleeps.delays[1] <= 1.0  # 0.5 * 2**n, jittered


async def test_gives_up_after_max_retries(server: FakeOpenAIServer) -> None:
    llm = await _llm(server, max_retries=2)
    server.fail_next(*[Fault(status=503, message="overloaded")] * 3)
    with pytest.raises(OptimizerError, match="gave up after 2 retries"):
        await llm.chat("critic", MESSAGES)
    await llm.aclose()
    assert len(_chat_bodies(server)) == 3


async def test_insufficient_quota_is_not_retried(server: FakeOpenAIServer) -> None:
    sleeps = Sleeps()
    llm = await _llm(server, sleeps)
    server.fail_next(Fault(status=429, message="You exceeded your current quota (insufficient_quota)."))
    with pytest.raises(OptimizerError, match="insufficient quota"):
        await llm.chat("critic", MESSAGES)
    await llm.aclose()
    assert sleeps.delays == [] and len(_chat_bodies(server)) == 1


async def test_a_slow_call_times_out_and_is_retried(server: FakeOpenAIServer) -> None:
    llm = await _llm(server, request_timeout=0.3)
    server.fail_next(Fault(status=500, delay_s=1.5))
    try:
        assert await llm.chat("critic", MESSAGES) == "reply from critic"
    finally:
        await llm.aclose()
    assert llm.usage.retries == 1


async def test_temperature_is_dropped_for_a_model_that_rejects_it(server: FakeOpenAIServer) -> None:
    llm = await _llm(server)
    try:
        assert await llm.chat("strict-model", MESSAGES, temperature=0.7) == "reply from strict-model"
        assert await llm.chat("strict-model", MESSAGES, temperature=0.7) == "reply from strict-model"
        assert await llm.chat("critic", MESSAGES, temperature=0.7) == "reply from critic"
    finally:
        await llm.aclose()
    sent = [(b["model"], b.get("temperature")) for b in _chat_bodies(server)]
    # First call: rejected with a temperature, retried without; then remembered for that model only.
    assert sent == [("strict-model", 0.7), ("strict-model", None), ("strict-model", None), ("critic", 0.7)]
    assert llm.usage.retries == 0
    assert not llm.sends_temperature("strict-model") and llm.sends_temperature("critic")


@pytest.mark.parametrize(
    ("model", "rejects"),
    [
        ("gpt-5-mini", True),
        ("gpt-5", True),
        ("o3-mini", True),
        ("o1", True),
        ("openai/o4-mini", True),
        ("gpt-5-chat-latest", False),
        ("gpt-4.1-mini", False),
        ("qwen2.5-7b-instruct", False),
    ],
)
def test_known_reasoning_models_never_get_a_temperature(model: str, rejects: bool) -> None:
    assert rejects_temperature(model) is rejects


async def test_reasoning_models_are_called_without_temperature(server: FakeOpenAIServer) -> None:
    llm = await _llm(server)
    try:
        await llm.chat("gpt-5-mini", MESSAGES, temperature=1.0)
    finally:
        await llm.aclose()
    assert "temperature" not in _chat_bodies(server)[0]


async def test_other_client_errors_fail_at_once(server: FakeOpenAIServer) -> None:
    llm = await _llm(server)
    server.fail_next(Fault(status=400, message="messages must not be empty"))
    with pytest.raises(OptimizerError, match="rejected the request"):
        await llm.chat("critic", MESSAGES)
    server.fail_next(Fault(status=401, message="Incorrect API key provided"))
    with pytest.raises(OptimizerConfigError, match="rejected the API key"):
        await llm.chat("critic", MESSAGES)
    await llm.aclose()
    assert len(_chat_bodies(server)) == 2


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_preflight_reports_an_unreachable_endpoint() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    llm = OptimizerLLM(base_url=url, api_key="k")
    with pytest.raises(OptimizerUnreachableError, match="unreachable") as info:
        await llm.preflight(["critic"], timeout=2.0)
    await llm.aclose()
    assert url in str(info.value)


async def test_preflight_accepts_a_live_endpoint(server: FakeOpenAIServer, caplog: Any) -> None:
    llm = await _llm(server)
    await llm.preflight(["critic", "missing-model"], timeout=2.0)
    await llm.aclose()
    assert [r.path for r in server.requests] == ["/v1/models"]
    assert "missing-model" in caplog.text  # listed models are checked, a missing one is only a warning


def test_a_key_is_required_for_the_official_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(OptimizerConfigError, match="OPENAI_API_KEY"):
        OptimizerLLM()
    local = OptimizerLLM(base_url="http://127.0.0.1:8000/v1")  # local servers need no key
    assert local.base_url == "http://127.0.0.1:8000/v1"


def test_endpoint_and_key_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gateway.internal/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    llm = OptimizerLLM()
    assert llm.base_url == "http://gateway.internal/v1"
    assert llm.client.api_key == "sk-env"


def _rate_limit_error(headers: dict[str, str]) -> Exception:
    import openai

    try:  # openai >= 3 is built on httpx2, earlier versions on httpx
        import httpx2 as http  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        import httpx as http  # type: ignore[no-redef, unused-ignore]
    request = http.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = http.Response(429, headers=headers, request=request)
    return openai.RateLimitError("Rate limit reached", response=response, body=None)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "100000"}, None),  # implausible: fall back to our own backoff
        ({}, None),
    ],
)
def test_retry_after_header_is_honoured(headers: dict[str, str], seconds: float | None) -> None:
    from agl_apo.optimizer import _retry_after_seconds

    assert _retry_after_seconds(_rate_limit_error(headers)) == seconds
