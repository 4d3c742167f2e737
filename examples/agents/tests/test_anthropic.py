"""The Anthropic SDK: the ``tool_use`` loop, captured on both paths."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from anthropic_agent import rollout
from harness import check_run, run_agent

from agl_core.testing.fake_openai import FakeOpenAIServer


@pytest.fixture
def anthropic_instrumented() -> Iterator[None]:
    rollout.instrument()
    yield
    rollout.uninstrument()


def test_anthropic_agent_tracer(fake_model: FakeOpenAIServer, anthropic_instrumented: None) -> None:
    check_run(run_agent(rollout.anthropic_rollout, fake_model, "tracer"), token_ids=False)


def test_anthropic_agent_proxy(fake_model: FakeOpenAIServer) -> None:
    check_run(run_agent(rollout.anthropic_rollout, fake_model, "proxy"))
