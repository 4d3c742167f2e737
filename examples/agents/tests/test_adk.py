"""Google ADK (``LiteLlm`` model): its message content arrives as OpenTelemetry log records."""

from __future__ import annotations

import pytest
from adk_agent.rollout import adk_rollout
from harness import CapturePath, check_run, run_agent

from agl_testing.fake_openai import FakeOpenAIServer

CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_adk_with_content_capture(
    fake_model: FakeOpenAIServer, path: CapturePath, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADK writes the messages as log records on its generate_content span; agl reads them as span events.
    The tracer path has no token ids (LiteLLM calls the server itself): doctor says exactly that."""
    monkeypatch.setenv(CAPTURE_CONTENT, "true")
    check_run(run_agent(adk_rollout, fake_model, path), token_ids=path == "proxy")


def test_adk_default_settings(fake_model: FakeOpenAIServer) -> None:
    """Content capture off (ADK's default): the proxy path is complete, doctor names the tracer path's fix."""
    check_run(run_agent(adk_rollout, fake_model, "proxy"))
    run = run_agent(adk_rollout, fake_model, "tracer")
    for record in run.records:
        report = record.doctor.report
        assert not report.ok and len(record.triplets) == 2
        unreadable = report.get("unreadable_llm_spans")
        assert unreadable is not None and CAPTURE_CONTENT in (unreadable.fix or "")
        assert {"empty_prompt", "missing_token_ids"} <= set(report.codes())
