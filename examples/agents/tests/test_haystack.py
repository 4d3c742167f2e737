"""Haystack's ``Agent`` with ``OpenAIChatGenerator`` on both paths, with its telemetry opt-out set.

Haystack 3.4 ships no OpenTelemetry tracer of its own any more (``haystack.tracing`` has the logging
tracer only), so there is no "own instrumentation on" case.
"""

from __future__ import annotations

import pytest
from harness import CapturePath, check_run, run_agent
from haystack_agent.rollout import haystack_rollout

from agl_core.testing.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_haystack_agent(fake_model: FakeOpenAIServer, path: CapturePath) -> None:
    check_run(run_agent(haystack_rollout, fake_model, path))
