"""LangChain 1.x ``create_agent``, plain and streamed, on both paths."""

from __future__ import annotations

import pytest
from harness import CapturePath, check_run, run_agent
from langchain_agent.rollout import create_agent_rollout, create_agent_stream_rollout

from agl_core.testing.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize(
    "entry", [create_agent_rollout, create_agent_stream_rollout], ids=["invoke", "stream"]
)
@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_create_agent(fake_model: FakeOpenAIServer, path: CapturePath, entry: object) -> None:
    check_run(run_agent(entry, fake_model, path))  # type: ignore[arg-type]
