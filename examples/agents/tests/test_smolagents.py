"""smolagents' ToolCallingAgent: roles it sends as ``MessageRole`` members are read as chat roles."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from harness import CapturePath, check_run, run_agent
from scripted_model import final_answer_model
from smolagents_agent.rollout import smolagents_rollout

from agl_core.testing.fake_openai import FakeOpenAIServer


@pytest.fixture
def smol_model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(final_answer_model, token_ids="always") as server:
        yield server


@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_smolagents_agent(smol_model: FakeOpenAIServer, path: CapturePath) -> None:
    # smolagents re-renders the earlier turns as text, so each prompt re-tokenizes the previous reply
    check_run(
        run_agent(smolagents_rollout, smol_model, path),
        tools=("multiply", "final_answer"),
        allowed_problems=("token_prefix_break",),
    )
