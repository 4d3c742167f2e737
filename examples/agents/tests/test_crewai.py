"""CrewAI (native OpenAI provider) with its documented telemetry opt-out, ``OTEL_SDK_DISABLED=true``.

The variable turns every OpenTelemetry SDK provider built under it into a no-op; agl's own providers keep
recording, so every call is still captured on both paths, with CrewAI's own tracing (OpenInference's
CrewAI instrumentor: crew, task and agent spans, no LLM span of its own) off and on. CrewAI pins
``openai<3``: this runs in ``.venv-agents-openai2`` (``make test-agents``) and is skipped where CrewAI is
not installed.
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("crewai")
os.environ["OTEL_SDK_DISABLED"] = "true"  # before CrewAI and agl build any provider in this process
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")

from crewai_agent.rollout import crewai_rollout, instrument, uninstrument
from harness import CapturePath, check_run, run_agent

from agl_testing.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize("own_tracing", [False, True], ids=["default", "openinference"])
@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_crewai_crew(fake_model: FakeOpenAIServer, path: CapturePath, own_tracing: bool) -> None:
    if own_tracing:
        instrument()
    try:
        run = run_agent(crewai_rollout, fake_model, path)
        check_run(run)
        if own_tracing:  # its spans were recorded (OTEL_SDK_DISABLED does not silence agl's providers)
            assert any(s.name.startswith("Crew") for s in run.records[0].spans), run.records[0].spans
    finally:
        if own_tracing:
            uninstrument()
