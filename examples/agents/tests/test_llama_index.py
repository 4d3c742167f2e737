"""LlamaIndex ``FunctionAgent`` with ``OpenAILike`` on both paths.

LlamaIndex's OpenAI integration pins ``openai<3``: this runs in ``.venv-agents-openai2`` (``make
test-agents``) and is skipped where LlamaIndex is not installed.
"""

from __future__ import annotations

import pytest

pytest.importorskip("llama_index.llms.openai_like")

from harness import CapturePath, check_run, run_agent
from llama_index_agent.rollout import llama_index_rollout

from agl_core.testing.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_llama_index_agent(fake_model: FakeOpenAIServer, path: CapturePath) -> None:
    check_run(run_agent(llama_index_rollout, fake_model, path))
