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
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "tests")]

import conftest  # noqa: E402,F401  (offline settings for the frameworks)
from harness import CapturePath, capture_summary, run_agent  # noqa: E402

from agl_testing.fake_openai import FakeOpenAIServer  # noqa: E402

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


def _entry(target: str) -> Any:
    """``module:attribute`` (or a module) of an example agent, imported when its row runs; None when its
    framework is not installed in this venv."""
    import importlib

    module, _, attribute = target.partition(":")
    try:
        value: Any = importlib.import_module(module)
    except ImportError:
        return None
    return getattr(value, attribute) if attribute else value


def _hooks(target: str) -> Setting:
    """The ``instrument``/``uninstrument`` pair of an example's rollout module as a setting."""

    @contextmanager
    def setting() -> Iterator[None]:
        module = _entry(target)
        module.instrument()
        try:
            yield
        finally:
            module.uninstrument()

    return setting


def _all(*settings: Setting) -> Setting:
    """Several settings at once, entered in order."""

    @contextmanager
    def setting() -> Iterator[None]:
        with ExitStack() as stack:
            for each in settings:
                stack.enter_context(each())
            yield

    return setting


@contextmanager
def _sk_diagnostics() -> Iterator[None]:
    with _entry("semantic_kernel_agent.rollout:diagnostics")(sensitive=True):
        yield


def _agents() -> list[tuple[str, str, str, Setting, str, Setting]]:
    """(framework, setting, rollout entry, tracer-path setup, fake model's script, setup for both paths)."""
    content = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
    return [
        (
            "openai-agents (Responses)",
            "default",
            "openai_agents_sdk.rollout:agents_sdk_rollout",
            _nothing,
            "calculator_model",
            _nothing,
        ),
        (
            "openai-agents (chat completions)",
            "default",
            "openai_agents_sdk.rollout:agents_sdk_chat_rollout",
            _nothing,
            "calculator_model",
            _nothing,
        ),
        (
            "langgraph + langchain-openai",
            "default",
            "langgraph_agent.rollout:langgraph_rollout",
            _nothing,
            "calculator_model",
            _nothing,
        ),
        (
            "litellm",
            "openinference",
            "litellm_agent.rollout:litellm_rollout",
            _hooks("litellm_agent.rollout"),
            "calculator_model",
            _nothing,
        ),
        (
            "anthropic",
            "content on",
            "anthropic_agent.rollout:anthropic_rollout",
            _hooks("anthropic_agent.rollout"),
            "calculator_model",
            _nothing,
        ),
        (
            "autogen-agentchat",
            "default",
            "autogen_agent.rollout:autogen_rollout",
            _nothing,
            "calculator_model",
            _nothing,
        ),
        (
            "pydantic-ai",
            "default",
            "pydantic_ai_agent.rollout:pydantic_ai_rollout",
            _nothing,
            "calculator_model",
            _nothing,
        ),
        (
            "pydantic-ai",
            "instrument_all()",
            "pydantic_ai_agent.rollout:pydantic_ai_rollout",
            _nothing,
            "calculator_model",
            _hooks("pydantic_ai_agent.rollout"),
        ),
        (
            "smolagents",
            "default",
            "smolagents_agent.rollout:smolagents_rollout",
            _nothing,
            "final_answer_model",
            _nothing,
        ),
        (
            "smolagents",
            "openinference",
            "smolagents_agent.rollout:smolagents_rollout",
            _nothing,
            "final_answer_model",
            _hooks("smolagents_agent.rollout"),
        ),
        (
            "langchain create_agent",
            "invoke",
            "langchain_agent.rollout:create_agent_rollout",
            _nothing,
            "calculator_model",
            _nothing,
        ),
        (
            "langchain create_agent",
            "stream",
            "langchain_agent.rollout:create_agent_stream_rollout",
            _nothing,
            "calculator_model",
            _nothing,
        ),
        (
            "langchain create_agent",
            "invoke, openinference",
            "langchain_agent.rollout:create_agent_rollout",
            _nothing,
            "calculator_model",
            _hooks("langchain_agent.rollout"),
        ),
        (
            "langchain create_agent",
            "stream, openinference",
            "langchain_agent.rollout:create_agent_stream_rollout",
            _nothing,
            "calculator_model",
            _hooks("langchain_agent.rollout"),
        ),
        (
            "haystack",
            "telemetry off",
            "haystack_agent.rollout:haystack_rollout",
            _nothing,
            "calculator_model",
            _nothing,
        ),
        (
            "haystack",
            "telemetry off, openinference",
            "haystack_agent.rollout:haystack_rollout",
            _nothing,
            "calculator_model",
            _hooks("haystack_agent.rollout"),
        ),
        ("agno", "telemetry off", "agno_agent.rollout:agno_rollout", _nothing, "calculator_model", _nothing),
        (
            "agno",
            "telemetry off, openinference",
            "agno_agent.rollout:agno_rollout",
            _nothing,
            "calculator_model",
            _hooks("agno_agent.rollout"),
        ),
        (
            "semantic-kernel",
            "default",
            "semantic_kernel_agent.rollout:semantic_kernel_rollout",
            _nothing,
            "calculator_model",
            _nothing,
        ),
        (
            "semantic-kernel",
            "diagnostics (sensitive)",
            "semantic_kernel_agent.rollout:semantic_kernel_rollout",
            _nothing,
            "calculator_model",
            _sk_diagnostics,
        ),
        ("dspy", "default", "dspy_agent.rollout:dspy_rollout", _nothing, "dspy_model", _fresh_dspy),
        (
            "dspy",
            "openinference",
            "dspy_agent.rollout:dspy_rollout",
            _nothing,
            "dspy_model",
            _all(_fresh_dspy, _hooks("dspy_agent.rollout")),
        ),
        ("google-adk", "default", "adk_agent.rollout:adk_rollout", _nothing, "calculator_model", _nothing),
        (
            "google-adk",
            "content capture",
            "adk_agent.rollout:adk_rollout",
            _nothing,
            "calculator_model",
            lambda: _env(content, "true"),
        ),
        ("crewai", "default", "crewai_agent.rollout:crewai_rollout", _nothing, "calculator_model", _nothing),
        (
            "crewai",
            "openinference",
            "crewai_agent.rollout:crewai_rollout",
            _nothing,
            "calculator_model",
            _hooks("crewai_agent.rollout"),
        ),
        (
            "llama-index",
            "default",
            "llama_index_agent.rollout:llama_index_rollout",
            _nothing,
            "calculator_model",
            _nothing,
        ),
        (
            "llama-index",
            "openinference",
            "llama_index_agent.rollout:llama_index_rollout",
            _nothing,
            "calculator_model",
            _hooks("llama_index_agent.rollout"),
        ),
    ]


def main(argv: list[str]) -> None:
    paths: tuple[CapturePath, ...] = ("tracer", "proxy")
    import scripted_model

    for name, setting, target, tracer_setup, script_name, both_setup in _agents():
        if argv and not any(word in name for word in argv):
            continue
        agent = _entry(target)
        if agent is None:
            print(
                json.dumps({"framework": name, "setting": setting, "error": "not installed here"}), flush=True
            )
            continue
        script = getattr(scripted_model, script_name)
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
