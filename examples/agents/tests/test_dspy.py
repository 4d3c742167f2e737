"""DSPy 3.4 (``dspy.configure`` + ``Predict``): thread-bound settings, and what each path records.

DSPy's own HTTP engine (``lm15``, no longer LiteLLM by default) is not traced by any instrumentation agl
has, so the tracer path records no LLM call and ``agl doctor`` says so; the proxy path records each call.
With DSPy's own tracing on (OpenInference's DSPy instrumentor, span ``LM.__call__``), the tracer path records
each call once without token ids (doctor: ``missing_token_ids``, naming that instrumentation), and on the
proxy path DSPy's span and the proxy's record are one call.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from dspy_agent.rollout import dspy_rollout, instrument, uninstrument
from harness import CapturePath, run_agent
from scripted_model import dspy_model

from agl_testing.fake_openai import FakeOpenAIServer


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


@pytest.fixture
def dspy_tracing() -> Iterator[None]:
    """DSPy's own tracing on for the test."""
    instrument()
    yield
    uninstrument()


@pytest.mark.usefixtures("dspy_tracing")
@pytest.mark.parametrize("path", ["tracer", "proxy"])
def test_own_tracing_records_each_call_once(dspy_server: FakeOpenAIServer, path: CapturePath) -> None:
    run = run_agent(dspy_rollout, dspy_server, path, n_tasks=2)
    assert run.model_calls == 2
    token_ids = path == "proxy"
    for record in run.records:
        where = f"{path} path, spans {[s.name for s in record.spans]}"
        assert record.rollout.status == "succeeded", where
        assert record.doctor.report.llm_span_count == 1, where
        (triplet,) = record.triplets
        assert triplet.prompt["raw_content"][-1]["role"] == "user", where
        assert "answer" in triplet.response["raw_content"][0]["content"], where
        assert bool(triplet.prompt["token_ids"]) == token_ids, where
        (sample,) = record.samples
        assert [m["role"] for m in sample["messages"]] == ["system", "user", "assistant"], where
        report = record.doctor.report
        if token_ids:
            assert report.ok and not report.problems, record.doctor.format()
        else:
            problem = report.get("missing_token_ids")
            assert problem is not None and "'LM.__call__'" in problem.message, record.doctor.format()
            assert "LLM proxy" in (problem.fix or "")


def test_configure_in_another_thread_first_gets_a_doctor_verdict(dspy_server: FakeOpenAIServer) -> None:
    """``dspy.configure()`` at import (the main thread), then again in the rollout: DSPy refuses; doctor
    names the cause and the fix."""
    import dspy

    dspy.configure(lm=None)  # this thread now owns DSPy's settings
    run = run_agent(dspy_rollout, dspy_server, "proxy", n_tasks=1)
    (record,) = run.records
    assert record.rollout.status == "failed" and run.model_calls == 0
    problem = record.doctor.report.problems[0]
    assert problem.code == "thread_bound_state", record.doctor.format()
    assert "can only be changed by the thread that initially configured it" in problem.message
    assert "dspy.context" in (problem.fix or "")
