"""AutoGen AgentChat: an ``AssistantAgent`` with a tool and reflection, captured on both paths."""

from __future__ import annotations

import pytest
from autogen_agent.rollout import autogen_rollout
from harness import CapturePath, check_run, run_agent

from agl_testing.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_autogen_agent(fake_model: FakeOpenAIServer, path: CapturePath) -> None:
    check_run(run_agent(autogen_rollout, fake_model, path))
