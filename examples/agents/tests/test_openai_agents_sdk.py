"""The OpenAI Agents SDK: its default Responses model and its chat completions model, on both paths."""

from __future__ import annotations

import pytest
from harness import CapturePath, check_run, run_agent
from openai_agents_sdk.rollout import agents_sdk_chat_rollout, agents_sdk_rollout, agents_sdk_streamed_rollout

from agl_testing.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_agents_sdk_responses(fake_model: FakeOpenAIServer, path: CapturePath) -> None:
    check_run(run_agent(agents_sdk_rollout, fake_model, path))


@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_agents_sdk_chat_completions(fake_model: FakeOpenAIServer, path: CapturePath) -> None:
    check_run(run_agent(agents_sdk_chat_rollout, fake_model, path))


@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_agents_sdk_responses_streamed(fake_model: FakeOpenAIServer, path: CapturePath) -> None:
    check_run(run_agent(agents_sdk_streamed_rollout, fake_model, path))
