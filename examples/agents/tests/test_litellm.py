"""LiteLLM: the agent's ``litellm.completion`` loop, captured on both paths."""

from __future__ import annotations

import pytest
from harness import CapturePath, check_run, run_agent
from litellm_agent.rollout import litellm_rollout

from agl_core.testing.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_litellm_agent(fake_model: FakeOpenAIServer, path: CapturePath) -> None:
    check_run(run_agent(litellm_rollout, fake_model, path))
