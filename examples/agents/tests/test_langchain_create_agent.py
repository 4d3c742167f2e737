"""LangChain 1.x ``create_agent``, plain and streamed, on both paths, with its own tracing off and on.

With its own tracing on (OpenInference's LangChain instrumentor), its ``ChatOpenAI`` span wraps agl's span
of each call: one call, read from the record with token ids.
"""

from __future__ import annotations

import pytest
from harness import CapturePath, check_run, run_agent
from langchain_agent.rollout import (
    create_agent_rollout,
    create_agent_stream_rollout,
    instrument,
    uninstrument,
)

from agl_testing.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize("own_tracing", [False, True], ids=["default", "openinference"])
@pytest.mark.parametrize(
    "entry", [create_agent_rollout, create_agent_stream_rollout], ids=["invoke", "stream"]
)
@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_create_agent(
    fake_model: FakeOpenAIServer, path: CapturePath, entry: object, own_tracing: bool
) -> None:
    if own_tracing:
        instrument()
    try:
        check_run(run_agent(entry, fake_model, path))  # type: ignore[arg-type]
    finally:
        if own_tracing:
            uninstrument()
