"""LiteLLM: the agent's ``litellm.completion`` loop, captured on both paths.

Tracer path: OpenInference's LiteLLM instrumentor, whose spans reach agl through the global provider.
(LiteLLM posts to ``/chat/completions`` with the ``openai`` client's low-level ``post``, which agl's
``openai`` instrumentation does not see; LiteLLM's own ``otel`` callback loses tool calls, see
docs/agents.md.)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from harness import check_run, run_agent
from litellm_agent import rollout

from agl_testing.fake_openai import FakeOpenAIServer


@pytest.fixture
def litellm_instrumented() -> Iterator[None]:
    rollout.instrument()
    yield
    rollout.uninstrument()


def test_litellm_agent_tracer(fake_model: FakeOpenAIServer, litellm_instrumented: None) -> None:
    # OpenInference records messages, tools and usage, not the token ids: agl doctor says so
    check_run(run_agent(rollout.litellm_rollout, fake_model, "tracer"), token_ids=False)


def test_litellm_agent_proxy(fake_model: FakeOpenAIServer) -> None:
    check_run(run_agent(rollout.litellm_rollout, fake_model, "proxy"))
