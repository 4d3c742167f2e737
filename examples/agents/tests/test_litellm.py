"""LiteLLM: the agent's ``litellm.completion`` loop, captured on both paths.

Tracer path: LiteLLM's own OpenTelemetry callback (``litellm.callbacks = ["otel"]``), whose spans reach agl
through the global provider. (LiteLLM posts to ``/chat/completions`` with the ``openai`` client's low-level
``post``, which agl's ``openai`` instrumentation does not see.)
"""

from __future__ import annotations

import pytest
from harness import check_run, run_agent
from litellm_agent import rollout

from agl_core.testing.fake_openai import FakeOpenAIServer


@pytest.fixture
def litellm_otel() -> None:
    rollout.instrument()  # process-wide: the proxy-path test may see these spans too, beside the proxy's


@pytest.mark.xfail(
    strict=True,
    reason="LiteLLM's otel span writes a tool-call reply as gen_ai.output.messages with empty parts (the "
    "call itself only in the legacy gen_ai.completion.0.function_call.*), and agl's normalisation layer "
    "reads the new form only, so the first reply's tool call is lost",
)
def test_litellm_agent_tracer(fake_model: FakeOpenAIServer, litellm_otel: None) -> None:
    # LiteLLM's GenAI span (``litellm_request``) has no token ids; its ``raw_gen_ai_request`` child keeps the
    # raw response (ids included) as Python reprs, which agl does not parse: use the proxy path for RL.
    check_run(run_agent(rollout.litellm_rollout, fake_model, "tracer"), token_ids=False)


def test_litellm_agent_proxy(fake_model: FakeOpenAIServer) -> None:
    check_run(run_agent(rollout.litellm_rollout, fake_model, "proxy"))
