"""Agno's ``Agent`` with ``OpenAIChat`` on both paths, with its telemetry opt-out set (``AGNO_TELEMETRY``).

Agno sends its instructions with the ``developer`` role (OpenAI's newer name for ``system``). With its own
tracing on (OpenInference's Agno instrumentor), its ``OpenAIChat.invoke`` span wraps agl's span of each call:
one call, read from the record with token ids.
"""

from __future__ import annotations

import pytest
from agno_agent.rollout import agno_rollout, instrument, uninstrument
from harness import CapturePath, check_run, run_agent

from agl_testing.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize("own_tracing", [False, True], ids=["default", "openinference"])
@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_agno_agent(fake_model: FakeOpenAIServer, path: CapturePath, own_tracing: bool) -> None:
    if own_tracing:
        instrument()
    try:
        check_run(run_agent(agno_rollout, fake_model, path))
    finally:
        if own_tracing:
            uninstrument()
