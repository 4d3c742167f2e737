"""LangGraph with ``langchain-openai``: the ReAct graph, captured on both paths."""

from __future__ import annotations

import pytest
from harness import CapturePath, check_run, run_agent
from langgraph_agent.rollout import langgraph_rollout

from agl_testing.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_langgraph_agent(fake_model: FakeOpenAIServer, path: CapturePath) -> None:
    check_run(run_agent(langgraph_rollout, fake_model, path))
