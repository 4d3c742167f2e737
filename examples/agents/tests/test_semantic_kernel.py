"""Semantic Kernel's ChatCompletionAgent on both paths, its own diagnostics off and on (with messages)."""

from __future__ import annotations

import contextlib

import pytest
from harness import CapturePath, check_run, run_agent
from semantic_kernel_agent.rollout import diagnostics, semantic_kernel_rollout

from agl_testing.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize("own_tracing", [False, True], ids=["default", "sensitive_diagnostics"])
@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_semantic_kernel_agent(fake_model: FakeOpenAIServer, path: CapturePath, own_tracing: bool) -> None:
    # with its diagnostics on, Semantic Kernel's chat span and agl's record each call: read once, from agl's
    with diagnostics(sensitive=True) if own_tracing else contextlib.nullcontext():
        run = run_agent(semantic_kernel_rollout, fake_model, path)
    # Semantic Kernel offers a plugin's functions as "<plugin>-<function>"
    check_run(run, tools=("MathPlugin-multiply",))
