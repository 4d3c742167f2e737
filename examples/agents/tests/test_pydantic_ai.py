"""pydantic-ai: captured on both paths, with its own instrumentation off (default) and on."""

from __future__ import annotations

import pytest
from harness import CapturePath, check_run, run_agent
from pydantic_ai_agent.rollout import instrument, pydantic_ai_rollout, uninstrument

from agl_testing.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize("own_tracing", [False, True], ids=["default", "instrument_all"])
@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_pydantic_ai_agent(fake_model: FakeOpenAIServer, path: CapturePath, own_tracing: bool) -> None:
    if own_tracing:
        instrument()
    try:
        # with its own tracing on, pydantic-ai's span and agl's record each call: read once, from agl's
        check_run(run_agent(pydantic_ai_rollout, fake_model, path))
    finally:
        uninstrument()
