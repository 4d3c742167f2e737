"""Put the example agents on the path, keep every framework offline, and serve the scripted fake model."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

# Offline: LiteLLM would fetch its model cost map from the network at import; the OpenAI Agents SDK would
# export its own traces to the OpenAI platform; LangSmith tracing stays off.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
os.environ.setdefault("LANGCHAIN_TRACING_V2", "false")
# The frameworks' documented telemetry opt-outs (they would phone home otherwise).
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
os.environ.setdefault("AGNO_TELEMETRY", "false")

from scripted_model import calculator_model  # noqa: E402

from agl_testing.fake_openai import FakeOpenAIServer  # noqa: E402


@pytest.fixture
def fake_model() -> Iterator[FakeOpenAIServer]:
    """The scripted model on a local port; it returns token ids on every API (as vLLM does when asked)."""
    with FakeOpenAIServer(calculator_model, token_ids="always") as server:
        yield server
