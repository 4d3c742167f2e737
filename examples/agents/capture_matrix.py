"""Print what agl records for each example agent on each capture path, one JSON object per line.

    .venv-agents/bin/python examples/agents/capture_matrix.py [framework ...]
    OTEL_SDK_DISABLED=true .venv-agents/bin/python examples/agents/capture_matrix.py [framework ...]

Runs every agent with ``Trainer.dev()`` on one task against the scripted fake model (offline), exactly as
the tests do, and summarises the LLM records of the rollout: span names, which shapes agl read, whether
prompt, completion, tools, usage, model, response id, token ids and logprobs are there, the model calls
made and recorded, triplets and chat samples, and ``agl doctor``'s verdict, per framework, setting and
path. docs/agents.md's table comes from this output.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "tests")]

import conftest  # noqa: E402,F401  (offline settings for the frameworks)
from harness import CapturePath, capture_summary, run_agent  # noqa: E402
from scripted_model import calculator_model  # noqa: E402

from agl_core.testing.fake_openai import FakeOpenAIServer  # noqa: E402

Setting = Callable[[], AbstractContextManager[Any]]
"""A framework setting to run under (its own instrumentation on, a telemetry switch...)."""


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _calls(setup: Callable[[], None], undo: Callable[[], None]) -> Setting:
    @contextmanager
    def setting() -> Iterator[None]:
        setup()
        try:
            yield
        finally:
            undo()

    return setting


@contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


@contextmanager
def _fresh_dspy() -> Iterator[None]:
    """DSPy's settings as in a fresh process (each run here is a new runner, so a new agent thread)."""
    import dspy  # noqa: F401

    sys.modules["dspy.dsp.utils.settings"].config_owner_thread_id = None  # type: ignore[attr-defined]
    yield


def _agents() -> list[tuple[str, str, Any, Setting, Callable[[dict[str, Any]], Any], Setting]]:
    """(framework, setting, rollout entry, tracer-path setup, fake model's script, setup for both paths)."""
    from adk_agent.rollout import adk_rollout
    from agno_agent.rollout import agno_rollout
    from anthropic_agent import rollout as anthropic_entry
    from autogen_agent.rollout import autogen_rollout
    from dspy_agent.rollout import dspy_rollout
    from haystack_agent.rollout import haystack_rollout
    from langchain_agent.rollout import create_agent_rollout, create_agent_stream_rollout
    from langgraph_agent.rollout import langgraph_rollout
    from litellm_agent import rollout as litellm_entry
    from openai_agents_sdk.rollout import agents_sdk_chat_rollout, agents_sdk_rollout
    from pydantic_ai_agent import rollout as pydantic_entry
    from scripted_model import dspy_model, final_answer_model
    from semantic_kernel_agent.rollout import diagnostics, semantic_kernel_rollout
    from smolagents_agent.rollout import smolagents_rollout

    content = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
    plain = calculator_model
    return [
        ("openai-agents (Responses)", "default", agents_sdk_rollout, _nothing, plain, _nothing),
        ("openai-agents (chat completions)", "default", agents_sdk_chat_rollout, _nothing, plain, _nothing),
        ("langgraph + langchain-openai", "default", langgraph_rollout, _nothing, plain, _nothing),
        (
            "litellm",
            "openinference",
            litellm_entry.litellm_rollout,
            _calls(litellm_entry.instrument, litellm_entry.uninstrument),
            plain,
            _nothing,
        ),
        (
            "anthropic",
            "content on",
            anthropic_entry.anthropic_rollout,
            _calls(anthropic_entry.instrument, anthropic_entry.uninstrument),
            plain,
            _nothing,
        ),
        ("autogen-agentchat", "default", autogen_rollout, _nothing, plain, _nothing),
        ("pydantic-ai", "default", pydantic_entry.pydantic_ai_rollout, _nothing, plain, _nothing),
        (
            "pydantic-ai",
            "instrument_all()",
            pydantic_entry.pydantic_ai_rollout,
            _nothing,
            plain,
            _calls(pydantic_entry.instrument, pydantic_entry.uninstrument),
        ),
        ("smolagents", "default", smolagents_rollout, _nothing, final_answer_model, _nothing),
        ("langchain create_agent", "invoke", create_agent_rollout, _nothing, plain, _nothing),
        ("langchain create_agent", "stream", create_agent_stream_rollout, _nothing, plain, _nothing),
        ("haystack", "telemetry off", haystack_rollout, _nothing, plain, _nothing),
        ("agno", "telemetry off", agno_rollout, _nothing, plain, _nothing),
        ("semantic-kernel", "default", semantic_kernel_rollout, _nothing, plain, _nothing),
        (
            "semantic-kernel",
            "diagnostics (sensitive)",
            semantic_kernel_rollout,
            _nothing,
            plain,
            lambda: diagnostics(sensitive=True),
        ),
        ("dspy", "default", dspy_rollout, _nothing, dspy_model, _fresh_dspy),
        ("google-adk", "default", adk_rollout, _nothing, plain, _nothing),
        ("google-adk", "content capture", adk_rollout, _nothing, plain, lambda: _env(content, "true")),
    ]


def main(argv: list[str]) -> None:
    paths: tuple[CapturePath, ...] = ("tracer", "proxy")
    for name, setting, agent, tracer_setup, script, both_setup in _agents():
        if argv and not any(word in name for word in argv):
            continue
        if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
            setting += ", OTEL_SDK_DISABLED=true"
        for path in paths:
            try:
                with (
                    both_setup(),
                    tracer_setup() if path == "tracer" else _nothing(),
                    FakeOpenAIServer(script, token_ids="always") as fake,
                ):
                    summary: dict[str, Any] = capture_summary(run_agent(agent, fake, path, n_tasks=1))
            except Exception as exc:  # a path that does not work yet is reported, not fatal
                summary = {"path": path, "error": f"{type(exc).__name__}: {exc}"}
            print(json.dumps({"framework": name, "setting": setting, **summary}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
