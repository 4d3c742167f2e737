"""0.3's module-level helpers, constants and type aliases, used the way 0.3 code used them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import datetime, timezone

import pytest
from opentelemetry.trace import StatusCode

import agl_core as agl
from agl_core.adapter.triplet import Transition
from agl_core.emitter.object import encode_object
from agl_core.store.memory import estimate_model_size
from agl_core.tracer.base import get_active_tracer, with_active_tracer_context
from agl_core.tracer.otel import to_otel_status_code
from agl_core.tracer.weave import get_timestamp_or_throw, op_name_to_func_name, random_project_name


def test_small_helpers_keep_03_results() -> None:
    assert Transition(state=[1], action=[2], response_id=None, agent_name="a", reward=0.5).reward == 0.5
    assert encode_object(3) == {"agentlightning.object.type": "int", "agentlightning.object.literal": "3"}
    with pytest.raises(RuntimeError):
        encode_object(object())
    assert to_otel_status_code("ERROR") is StatusCode.ERROR and to_otel_status_code("OK") is StatusCode.OK
    assert estimate_model_size(agl.Triplet(prompt={}, response={})) > estimate_model_size({})
    name = "weave:///me/proj/op/openai.chat.completions.create:019b10be"
    assert op_name_to_func_name(name) == "openai.chat.completions.create"
    assert random_project_name().startswith("agl/weave-") and random_project_name() != random_project_name()
    assert get_timestamp_or_throw(datetime(2026, 1, 1, tzinfo=timezone.utc), "started_at") == 1767225600.0
    with pytest.raises(ValueError, match="started_at"):
        get_timestamp_or_throw(None, "started_at")


@pytest.mark.asyncio
async def test_with_active_tracer_context_covers_the_whole_block() -> None:
    class Probe(agl.DummyTracer):
        @with_active_tracer_context
        @contextlib.asynccontextmanager
        async def session(self) -> AsyncIterator[str]:
            yield "inside"

    tracer = Probe()
    async with tracer.session() as value:
        assert value == "inside" and get_active_tracer() is tracer
        await asyncio.sleep(0)
        assert get_active_tracer() is tracer
    assert get_active_tracer() is None


def test_inter_process_strategy_is_0_3s_placeholder() -> None:
    from agl_core.execution.inter_process import InterProcessExecutionStrategy

    strategy = InterProcessExecutionStrategy()
    assert strategy.alias == "ipc"
    with pytest.raises(NotImplementedError, match="strategy='cs'"):
        strategy.execute(None, None, None)  # type: ignore[arg-type]
