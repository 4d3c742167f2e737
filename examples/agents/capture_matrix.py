"""Print what agl records for each example agent on each capture path, one JSON object per line.

    .venv-agents/bin/python examples/agents/capture_matrix.py [framework ...]

Runs every agent with ``Trainer.dev()`` on one task against the scripted fake model (offline), exactly as
the tests do, and summarises the LLM records of the rollout: span names, which shapes agl read, whether
prompt, completion, tools, usage, model, response id, token ids and logprobs are there, and ``agl doctor``'s
verdict. docs/agents.md's table comes from this output.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "tests")]

import conftest  # noqa: E402,F401  (offline settings for the frameworks)
from harness import CapturePath, capture_summary, run_agent  # noqa: E402
from scripted_model import calculator_model  # noqa: E402

from agl_core.testing.fake_openai import FakeOpenAIServer  # noqa: E402


def _agents() -> dict[str, tuple[Any, Callable[[], None], Callable[[], None]]]:
    """Framework name -> (rollout entry, tracer-path setup, its undo)."""
    from anthropic_agent import rollout as anthropic_entry
    from autogen_agent.rollout import autogen_rollout
    from langgraph_agent.rollout import langgraph_rollout
    from litellm_agent import rollout as litellm_entry
    from openai_agents_sdk.rollout import agents_sdk_chat_rollout, agents_sdk_rollout

    def nothing() -> None:
        return None

    return {
        "openai-agents (Responses)": (agents_sdk_rollout, nothing, nothing),
        "openai-agents (chat completions)": (agents_sdk_chat_rollout, nothing, nothing),
        "langgraph + langchain-openai": (langgraph_rollout, nothing, nothing),
        "litellm": (litellm_entry.litellm_rollout, litellm_entry.instrument, litellm_entry.uninstrument),
        "anthropic": (
            anthropic_entry.anthropic_rollout,
            anthropic_entry.instrument,
            anthropic_entry.uninstrument,
        ),
        "autogen-agentchat": (autogen_rollout, nothing, nothing),
    }


def main(argv: list[str]) -> None:
    paths: tuple[CapturePath, ...] = ("tracer", "proxy")
    for name, (agent, setup, undo) in _agents().items():
        if argv and not any(word in name for word in argv):
            continue
        for path in paths:
            if path == "tracer":
                setup()
            try:
                with FakeOpenAIServer(calculator_model, token_ids="always") as fake:
                    summary: dict[str, Any] = capture_summary(run_agent(agent, fake, path, n_tasks=1))
            except Exception as exc:  # a path that does not work yet is reported, not fatal
                summary = {"path": path, "error": f"{type(exc).__name__}: {exc}"}
            finally:
                if path == "tracer":
                    undo()
            print(json.dumps({"framework": name, **summary}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
