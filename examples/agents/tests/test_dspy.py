"""DSPy 3.4 (``dspy.configure`` + ``Predict``): thread-bound settings, and what each path records.

DSPy's own HTTP engine (``lm15``, no longer LiteLLM by default) is not traced by any instrumentation agl
has, so the tracer path records no LLM call and ``agl doctor`` says so; the proxy path records each call.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from dspy_agent.rollout import dspy_rollout
from harness import run_agent
from scripted_model import dspy_model

from agl_core.testing.fake_openai import FakeOpenAIServer


@pytest.fixture
def dspy_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    """DSPy's answers in its ChatAdapter format; DSPy's settings as in a fresh process (no owner thread)."""
    import dspy  # noqa: F401  (loads the settings module; the package attribute is the settings object)

    monkeypatch.setattr(sys.modules["dspy.dsp.utils.settings"], "config_owner_thread_id", None)
    with FakeOpenAIServer(dspy_model, token_ids="always") as server:
        yield server


def test_every_rollout_of_a_runner_may_call_dspy_configure(dspy_server: FakeOpenAIServer) -> None:
    """A runner runs its sync agent on one thread, so DSPy's documented configure() works in every rollout."""
    run = run_agent(dspy_rollout, dspy_server, "proxy", n_tasks=6)
    assert [r.rollout.status for r in run.records] == ["succeeded"] * 6
    assert run.model_calls == 6
    for record in run.records:
        assert len(record.triplets) == 1 and record.triplets[0].response["token_ids"]
        assert record.triplets[0].reward == 1.0
        (sample,) = record.samples
        assert [m["role"] for m in sample["messages"]] == ["system", "user", "assistant"]
        assert record.doctor.report.ok, record.doctor.format()


def test_tracer_path_gets_a_doctor_verdict_naming_the_cause(dspy_server: FakeOpenAIServer) -> None:
    run = run_agent(dspy_rollout, dspy_server, "tracer", n_tasks=1)
    (record,) = run.records
    assert record.rollout.status == "succeeded" and run.model_calls == 1
    assert record.triplets == []
    problem = record.doctor.report.get("no_llm_spans")
    assert problem is not None and "LLM proxy" in (problem.fix or "")
