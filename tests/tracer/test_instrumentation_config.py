"""How LLM capture is configured: content capture switch, foreign instrumentation, helpers."""

from __future__ import annotations

import asyncio
import json
import os

import openai
import pytest

from agl_core.instrumentation import instrument_all, uninstrument_all
from agl_core.instrumentation.openai import CAPTURE_CONTENT_ENV, is_openai_instrumented
from agl_core.semconv import (
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OUTPUT_MESSAGES,
    PROMPT_TOKEN_IDS,
    RESPONSE_TOKEN_IDS,
)
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer.otel import OtelTracer
from agl_testing.fake_openai import FakeOpenAIServer
from tests.tracer._helpers import new_attempt


async def test_content_capture_defaults_on_and_respects_an_explicit_user_choice(
    monkeypatch: pytest.MonkeyPatch, store: InMemoryLightningStore, llm_server: FakeOpenAIServer
) -> None:
    client = openai.OpenAI(api_key="test", base_url=llm_server.base_url)
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    for user_choice in (None, "NO_CONTENT"):
        if user_choice is not None:
            monkeypatch.setenv(CAPTURE_CONTENT_ENV, user_choice)
        tracer = OtelTracer()
        tracer.init_worker(0, store)
        try:
            rollout_id, attempt_id = await new_attempt(store)
            async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
                client.chat.completions.create(model="m", messages=[{"role": "user", "content": "secret"}])
            (span,) = await store.query_spans(rollout_id)
        finally:
            tracer.teardown_worker(0)
        assert span.attributes[RESPONSE_TOKEN_IDS] and span.attributes[PROMPT_TOKEN_IDS]  # always captured
        if user_choice is None:
            assert (
                json.loads(str(span.attributes[GEN_AI_INPUT_MESSAGES]))[0]["parts"][0]["content"] == "secret"
            )
        else:
            assert GEN_AI_INPUT_MESSAGES not in span.attributes
            assert GEN_AI_OUTPUT_MESSAGES not in span.attributes
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    tracer = OtelTracer()
    tracer.init_worker(0, store)
    tracer.teardown_worker(0)
    assert CAPTURE_CONTENT_ENV not in os.environ  # agl removes the default it set


async def test_a_foreign_wrapper_of_the_openai_client_keeps_working_beside_agls(
    store: InMemoryLightningStore, llm_server: FakeOpenAIServer
) -> None:
    """Another instrumentation wrapping ``create`` (before agl) keeps running; agl's removal leaves it."""
    import wrapt

    seen: list[str] = []

    def foreign(wrapped, instance, args, kwargs):  # type: ignore[no-untyped-def]
        seen.append(kwargs["model"])
        return wrapped(*args, **kwargs)

    completions = openai.resources.chat.completions.Completions
    original = completions.create
    wrapt.wrap_function_wrapper(completions, "create", foreign)
    try:
        tracer = OtelTracer()
        tracer.init_worker(0, store)
        try:
            client = openai.OpenAI(api_key="test", base_url=llm_server.base_url)
            rollout_id, attempt_id = await new_attempt(store)
            async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
                client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            (span,) = await store.query_spans(rollout_id)
            assert span.attributes[RESPONSE_TOKEN_IDS]
        finally:
            tracer.teardown_worker(0)
        assert seen == ["m"]
        assert completions.create.__wrapped__ is original  # the foreign wrapper is still in place
    finally:
        completions.create = original


def test_instrument_all_and_uninstrument_all() -> None:
    assert not is_openai_instrumented()
    assert instrument_all() == ["openai"]
    assert is_openai_instrumented()
    uninstrument_all()
    assert not is_openai_instrumented()


def test_get_last_trace_after_asyncio_run_and_deprecated_helpers(store: InMemoryLightningStore) -> None:
    from agl_core.emitter import emit_message

    tracer = OtelTracer(instrument_llm_clients=False)
    tracer.init_worker(0, store)
    try:

        async def agent() -> str:
            async with tracer.trace_context():
                emit_message("from asyncio.run")
            return "done"

        assert asyncio.run(agent()) == "done"
        # asyncio.run ran in a copied context; the tracer still knows its last trace.
        assert [s.attributes["agentlightning.message.body"] for s in tracer.get_last_trace()] == [
            "from asyncio.run"
        ]

        with pytest.warns(DeprecationWarning, match="trace_run is deprecated"):
            assert tracer.trace_run(lambda x: emit_message(x) or x, "sync") == "sync"
        assert len(tracer.get_last_trace()) == 1

        async def emit_async(x: str) -> str:
            emit_message(x)
            return x

        async def main() -> None:
            with pytest.warns(DeprecationWarning, match="trace_run_async is deprecated"):
                assert await tracer.trace_run_async(emit_async, "async") == "async"
            assert tracer.get_last_trace()[0].attributes["agentlightning.message.body"] == "async"

        asyncio.run(main())
    finally:
        tracer.teardown_worker(0)
