"""0.3 constructor arguments: ``LLMProxy``'s LiteLLM-era options,
``LightningStoreClient(server_address=...)``, ``OperationContext(name=...)`` and
``LightningSpanProcessor(disable_store_submission=...)``."""

from __future__ import annotations

import socket

import openai
import pytest

import agl_core as agl
from agl_core.emitter.annotation import OperationContext
from agl_core.tracer.otel import LightningSpanProcessor
from agl_testing.fake_openai import FakeOpenAIServer


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _two_calls(proxy: agl.LLMProxy) -> list[bool]:
    client = openai.AsyncOpenAI(base_url=proxy.endpoint, api_key="unused", max_retries=0)
    outcomes = []
    for _ in range(2):
        try:
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            outcomes.append(True)
        except openai.APIError:
            outcomes.append(False)
    await client.close()
    return outcomes


@pytest.mark.parametrize("how", ["num_retries", "litellm_config"])
async def test_num_retries_fails_over_to_a_live_replica(how: str) -> None:
    async with FakeOpenAIServer(["ok"] * 8) as model:
        model_list = [
            {"model_name": "m", "litellm_params": {"model": "hosted_vllm/m", "api_base": base}}
            for base in (f"http://127.0.0.1:{_closed_port()}/v1", model.base_url)
        ]
        retry = (
            {"num_retries": 1}
            if how == "num_retries"
            else {"litellm_config": {"litellm_settings": {"num_retries": 1}}}
        )
        async with agl.LLMProxy(
            port=None, model_list=model_list, launch_mode="thread", num_workers=1, **retry
        ) as proxy:
            assert await _two_calls(proxy) == [True, True]
        async with agl.LLMProxy(port=None, model_list=model_list, num_retries=0) as proxy:
            assert False in await _two_calls(proxy), "without retries a call to the dead replica must fail"


def test_proxy_options_agl_cannot_serve_raise_naming_the_fix() -> None:
    agl.LLMProxy(middlewares=["rollout_attempt", "stream_conversion"], launch_mode="asyncio", num_workers=4)
    with pytest.raises(ValueError, match="host= and port="):
        agl.LLMProxy(launcher_args=object())
    with pytest.raises(ValueError, match="message_inspection"):
        agl.LLMProxy(middlewares=["message_inspection"])
    with pytest.raises(ValueError, match="router_settings"):
        agl.LLMProxy(litellm_config={"router_settings": {}})
    with pytest.raises(ValueError, match="launch_mode"):
        agl.LLMProxy(launch_mode="process")


async def test_store_client_with_03_arguments_talks_to_the_server() -> None:
    server = agl.LightningStoreServer(agl.InMemoryLightningStore(), "127.0.0.1", 0)
    await server.start()
    try:
        client = agl.LightningStoreClient(
            server_address=server.endpoint,
            retry_delays=(0.1, 0.2),
            health_retry_delays=(0.1,),
            request_timeout=20.0,
            connection_timeout=5.0,
        )
        assert (client.retries, client.backoff, client.timeout) == (2, (0.1, 0.2), 20.0)
        rollout = await client.enqueue_rollout(input={"q": 1})
        assert (await server.get_rollout_by_id(rollout.rollout_id)) is not None
        await client.close()
    finally:
        await server.stop()
    with pytest.raises(TypeError, match="server_address"):
        agl.LightningStoreClient()


async def test_operation_context_name_is_the_span_name() -> None:
    tracer = agl.OtelTracer()
    tracer.init_worker(0, agl.InMemoryLightningStore())
    try:
        async with tracer.trace_context("op-test"):
            with OperationContext(name="my-step", attributes={"k": 1}):
                pass
            with OperationContext("positional-step", {"k": 2}, True):  # 0.3's (name, attributes, propagate)
                pass
        names = [span.name for span in tracer.get_last_trace()]
    finally:
        tracer.teardown_worker(0)
    assert "my-step" in names and "positional-step" in names
    with pytest.raises(TypeError, match="attributes must be a dict"):
        OperationContext("my-step", True)


def test_span_processor_accepts_the_03_default_and_refuses_what_it_cannot_do() -> None:
    assert LightningSpanProcessor(disable_store_submission=False).disable_store_submission is False
    with pytest.raises(ValueError, match="without a store"):
        LightningSpanProcessor(disable_store_submission=True)
