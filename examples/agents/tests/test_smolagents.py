"""smolagents' ToolCallingAgent: roles it sends as ``MessageRole`` members are read as chat roles.

With its own tracing on (OpenInference's smolagents instrumentor), its ``OpenAIModel.generate`` span wraps
agl's span of each call: one call, read from agl's record (token ids) on the tracer path, from the proxy's
on the proxy path.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from harness import CapturePath, check_run, run_agent
from scripted_model import final_answer_model
from smolagents_agent.rollout import instrument, smolagents_rollout, uninstrument

from agl_testing.fake_openai import FakeOpenAIServer


@pytest.fixture
def smol_model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(final_answer_model, token_ids="always") as server:
        yield server


@pytest.mark.parametrize("own_tracing", [False, True], ids=["default", "openinference"])
@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_smolagents_agent(smol_model: FakeOpenAIServer, path: CapturePath, own_tracing: bool) -> None:
    if own_tracing:
        instrument()
    try:
        # smolagents re-renders the earlier turns as text, so each prompt re-tokenizes the previous reply
        check_run(
            run_agent(smolagents_rollout, smol_model, path),
            tools=("multiply", "final_answer"),
            allowed_problems=("token_prefix_break",),
        )
    finally:
        if own_tracing:
            uninstrument()
