"""Agno's ``Agent`` with ``OpenAIChat`` on both paths, with its telemetry opt-out set (``AGNO_TELEMETRY``).

Agno sends its instructions with the ``developer`` role (OpenAI's newer name for ``system``).
"""

from __future__ import annotations

import pytest
from agno_agent.rollout import agno_rollout
from harness import CapturePath, check_run, run_agent

from agl_core.testing.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_agno_agent(fake_model: FakeOpenAIServer, path: CapturePath) -> None:
    check_run(run_agent(agno_rollout, fake_model, path))
