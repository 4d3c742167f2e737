"""The Anthropic SDK: the ``tool_use`` loop, captured on both paths."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from anthropic_agent import rollout
from harness import check_run, run_agent

from agl_testing.fake_openai import FakeOpenAIServer


@pytest.fixture
def anthropic_instrumented() -> Iterator[None]:
    rollout.instrument()
    yield
    rollout.uninstrument()


def test_anthropic_agent_tracer(fake_model: FakeOpenAIServer, anthropic_instrumented: None) -> None:
    # the SDK's own spans carry the messages but neither token ids nor the tool definitions
    check_run(
        run_agent(rollout.anthropic_rollout, fake_model, "tracer"), token_ids=False, tools_recorded=False
    )


def test_anthropic_agent_proxy(fake_model: FakeOpenAIServer) -> None:
    check_run(run_agent(rollout.anthropic_rollout, fake_model, "proxy"))
