"""Haystack's ``Agent`` with ``OpenAIChatGenerator`` on both paths, with its telemetry opt-out set.

Haystack 3.4 ships no OpenTelemetry tracer of its own (``haystack.tracing`` has the logging tracer only);
its tracing comes from OpenInference's Haystack instrumentor, whose ``OpenAIChatGenerator.run`` span wraps
agl's span of each call: one call, read from the record with token ids.
"""

from __future__ import annotations

import pytest
from harness import CapturePath, check_run, run_agent
from haystack_agent.rollout import haystack_rollout, instrument, uninstrument

from agl_testing.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize("own_tracing", [False, True], ids=["default", "openinference"])
@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_haystack_agent(fake_model: FakeOpenAIServer, path: CapturePath, own_tracing: bool) -> None:
    if own_tracing:
        instrument()
    try:
        check_run(run_agent(haystack_rollout, fake_model, path))
    finally:
        if own_tracing:
            uninstrument()
