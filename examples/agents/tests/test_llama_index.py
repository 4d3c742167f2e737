"""LlamaIndex ``FunctionAgent`` with ``OpenAILike`` on both paths.

With its own tracing on (OpenInference's LlamaIndex instrumentor), each call gets an ``astream_chat`` span
(with the messages) beside agl's span rather than around it (the streamed call runs after the span's own
context), plus ``_prepare_chat_with_tools`` / outer ``astream_chat`` spans of kind LLM that carry no call:
still one call each, read from the record with token ids.

LlamaIndex's OpenAI integration pins ``openai<3``: this runs in ``.venv-agents-openai2`` (``make
test-agents``) and is skipped where LlamaIndex is not installed.
"""

from __future__ import annotations

import pytest

pytest.importorskip("llama_index.llms.openai_like")

from harness import CapturePath, check_run, run_agent
from llama_index_agent.rollout import instrument, llama_index_rollout, uninstrument

from agl_testing.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize("own_tracing", [False, True], ids=["default", "openinference"])
@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_llama_index_agent(fake_model: FakeOpenAIServer, path: CapturePath, own_tracing: bool) -> None:
    if own_tracing:
        instrument()
    try:
        check_run(run_agent(llama_index_rollout, fake_model, path))
    finally:
        if own_tracing:
            uninstrument()
