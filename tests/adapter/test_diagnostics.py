"""Adapter reports: each cause of missing or bad training data, with the exact text a user reads."""

from __future__ import annotations

import json

from agl_core.adapter import AdapterReport, LlmProxyTraceToTriplet, TracerTraceToTriplet, TraceToTripletBase
from agl_core.types import Span, Triplet
from tests.adapter.traces import TraceBuilder, user

FIX_TOKEN_IDS = (
    'Ask the model server for them with `extra_body={"return_token_ids": True}` (vLLM >= 0.10.2), or route '
    "the agent's calls through the agl LLM proxy, which records them."
)


def reward_span_id(spans: list[Span], value: float) -> str:
    return next(s.span_id for s in spans if s.attributes.get("agentlightning.reward.0.value") == value)


def test_no_llm_span_names_what_was_seen_and_lookalikes() -> None:
    b = TraceBuilder()
    with b.agent("extractor", 0, 10), b.span("ChatOpenAI.with_structured_output", 1, 5):
        pass
    b.reward(11, 1.0)
    report = TracerTraceToTriplet().diagnose(b.spans())
    assert not report.ok
    problem = report.problems[0]
    assert (problem.code, problem.severity) == ("no_llm_spans", "error")
    assert problem.message == (
        "No LLM-call span among the 3 spans of this rollout (span names seen: "
        "'ChatOpenAI.with_structured_output', 'invoke_agent extractor', 'agentlightning.annotation'). "
        "'ChatOpenAI.with_structured_output' look like LLM calls but match neither the adapter's "
        "llm_call_match nor a known LLM-span shape (attribute keys of 'ChatOpenAI.with_structured_output': "
        "none)."
    )
    assert problem.fix is not None
    assert problem.fix.startswith(
        "If 'ChatOpenAI.with_structured_output' records the model's token ids, pass"
    )
    assert "through the `openai` client (agl instruments it)" in problem.fix
    unattributed = report.get("reward_unattributed")
    assert unattributed is not None
    assert unattributed.message.endswith(
        "is not attributed to any LLM call: no LLM call was selected in this rollout."
    )


def test_no_llm_span_without_lookalikes_points_at_the_openai_client() -> None:
    b = TraceBuilder()
    with b.span("agentlightning.operation", 0, 1):
        pass
    report = TracerTraceToTriplet().diagnose(b.spans())
    assert report.problems[0].message == (
        "No LLM-call span among the 1 spans of this rollout (span names seen: 'agentlightning.operation')."
    )
    fix = report.problems[0].fix
    assert fix is not None and fix.startswith(
        "Make the agent's model calls visible while agl's tracer is active"
    )
    assert "OpenInference" in fix and "LLM proxy" in fix
    assert report.codes() == ["no_llm_spans", "no_reward"]
    assert report.problems[1].severity == "warning"  # without triplets, the missing reward is secondary
    assert TracerTraceToTriplet().diagnose([]).codes() == ["no_spans"]


def test_llm_spans_without_token_ids() -> None:
    b = TraceBuilder()
    b.llm(0, 1, [user("a")], "b", prompt_ids=None, response_ids=None)
    b.llm(2, 3, [user("c")], "d", prompt_ids=None, response_ids=None)
    b.reward(4, 1.0)
    report = TracerTraceToTriplet().diagnose(b.spans())
    problem = report.get("missing_token_ids")
    assert problem is not None and problem.severity == "error" and not report.ok
    assert problem.message == (
        "2 of 2 LLM calls have no prompt and response token ids, so they cannot be used for RL training."
    )
    assert problem.fix == FIX_TOKEN_IDS
    assert len(problem.span_ids) == 2


def test_some_calls_without_response_ids_is_a_warning() -> None:
    b = TraceBuilder()
    b.llm(0, 1, [user("a")], "b")
    b.llm(2, 3, [user("c")], "d", response_ids=None)
    b.reward(4, 1.0)
    report = TracerTraceToTriplet().diagnose(b.spans())
    problem = report.get("missing_token_ids")
    assert problem is not None and problem.severity == "warning" and report.ok
    assert (
        problem.message
        == "1 of 2 LLM calls have no response token ids, so they cannot be used for RL training."
    )
    dropped = TracerTraceToTriplet(_skip_empty_token_spans=True).diagnose(b.spans()).get("missing_token_ids")
    assert dropped is not None
    assert dropped.message == (
        "1 of 2 LLM calls have no response token ids, so they cannot be used for RL training. "
        "1 of them were dropped for that reason."
    )


def test_no_reward() -> None:
    b = TraceBuilder()
    b.llm(0, 1, [user("a")], "b")
    report = TracerTraceToTriplet().diagnose(b.spans())
    assert report.codes() == ["no_reward"] and not report.ok
    problem = report.problems[0]
    assert problem.message == "No reward span in this rollout, so every triplet has reward None."
    assert problem.fix == (
        "Call agl.emit_reward(value) in the agent after the LLM calls it scores, or return a float from the "
        "rollout function."
    )


def test_reward_emitted_before_any_call_ended_is_not_attributable() -> None:
    b = TraceBuilder()
    b.reward(0.5, 1.0)
    b.llm(1, 5, [user("a")], "b")
    spans = b.spans()
    report = TracerTraceToTriplet().diagnose(spans)
    problem = report.get("reward_unattributed")
    assert problem is not None and problem.severity == "error" and not report.ok
    assert problem.message == (
        f"Reward 1 (span {reward_span_id(spans, 1.0)}) is not attributed to any LLM call: it was emitted "
        "before the first LLM call ended."
    )
    assert problem.fix == "Emit the reward after the LLM call it scores has returned."


def test_second_reward_for_the_only_call_is_reported() -> None:
    b = TraceBuilder()
    b.llm(0, 1, [user("a")], "b")
    b.reward(2, 0.25)
    b.reward(3, 0.75)
    spans = b.spans()
    report = TracerTraceToTriplet().diagnose(spans)
    assert [t.reward for t in report.triplets] == [0.25]
    problem = report.get("reward_unattributed")
    assert problem is not None and problem.severity == "warning"
    assert problem.message == (
        f"Reward 0.75 (span {reward_span_id(spans, 0.75)}) is not attributed to any LLM call: every LLM call "
        "before it already has a reward (each call takes at most one)."
    )


def test_prompt_and_response_length_limits() -> None:
    b = TraceBuilder()
    b.llm(0, 1, [user("a")], "b", prompt_ids=list(range(10)), response_ids=[1, 2, 3])
    b.llm(2, 3, [user("c")], "d", prompt_ids=[1], response_ids=[1])
    b.reward(4, 1.0)
    report = TracerTraceToTriplet(max_prompt_length=8, max_response_length=2).diagnose(b.spans())
    prompt, response = report.get("prompt_too_long"), report.get("response_too_long")
    assert prompt is not None and response is not None
    assert prompt.message == (
        "1 of 2 triplets exceed max_prompt_length=8 tokens (longest: 10); the trainer will truncate or drop "
        "them."
    )
    assert response.message.startswith("1 of 2 triplets exceed max_response_length=2 tokens (longest: 3)")


def test_retokenized_multi_turn_prompt_is_flagged() -> None:
    b = TraceBuilder()
    with b.agent("chat", 0, 20):
        b.llm(1, 2, [user("hi")], "hello", prompt_ids=[1, 2], response_ids=[3, 4])
        b.llm(
            3,
            4,
            [user("hi"), {"role": "assistant", "content": "hello"}, user("more")],
            "x",
            prompt_ids=[1, 2, 3, 9, 5],
        )
        b.llm(5, 6, [user("new topic")], "y", prompt_ids=[7], response_ids=[8])
    b.reward(21, 1.0)
    report = TracerTraceToTriplet().diagnose(b.spans())
    assert report.codes() == ["token_prefix_break"]
    assert report.problems[0].message.startswith(
        "Triplet 1 continues triplet 0's conversation but its prompt token"
    )


def test_mixed_logprobs_is_noted() -> None:
    b = TraceBuilder()
    b.llm(0, 1, [user("a")], "b", logprobs=[{"token": "b", "logprob": -0.1}])
    b.llm(2, 3, [user("c")], "d")
    b.reward(4, 1.0)
    problem = TracerTraceToTriplet().diagnose(b.spans()).get("missing_logprobs")
    assert problem is not None and problem.severity == "info"
    assert problem.message == "1 of 2 triplets carry no logprobs while the others do."


def test_report_counts_summaries_text_and_json() -> None:
    b = TraceBuilder()
    with b.agent("solver", 0, 10):
        b.llm(1, 2, [user("a")], "b", response_id="r1", prompt_ids=[1, 2, 3], response_ids=[4])
    b.reward(11, 0.5)
    triplets, report = TracerTraceToTriplet().adapt_with_report(b.spans())
    assert report.ok and report.problems == []
    assert report.span_kinds == {"agent": 1, "llm": 1, "reward": 1}
    assert report.rollout_ids == ["ro-1"] and report.attempt_ids == ["at-1"]
    (summary,) = report.triplets
    assert (summary.response_id, summary.agent_name, summary.prompt_tokens, summary.response_tokens) == (
        "r1",
        "solver",
        3,
        1,
    )
    assert summary.reward == 0.5 == triplets[0].reward
    text = report.format()
    assert "Verdict: OK (triplets: 1, with a reward: 1)" in text
    assert "Problems: none" in text
    data = json.loads(report.model_dump_json())
    assert data["ok"] is True and data["triplets"][0]["prompt_tokens"] == 3
    assert AdapterReport.model_validate(data).triplets == report.triplets


def test_default_report_of_a_custom_adapter_uses_its_triplets() -> None:
    class OneTriplet(TraceToTripletBase):
        def adapt(self, source: object) -> list[Triplet]:
            return [Triplet(prompt={"token_ids": [1]}, response={"token_ids": []}, reward=None)]

    report = OneTriplet().diagnose([])
    assert report.adapter == "OneTriplet"
    assert report.codes() == ["no_spans", "missing_token_ids"]


def test_proxy_adapter_explains_missing_proxy_spans() -> None:
    b = TraceBuilder()
    b.llm(0, 1, [user("a")], "b")
    b.reward(2, 1.0)
    report = LlmProxyTraceToTriplet().diagnose(b.spans())
    assert report.codes()[0] == "no_proxy_spans"
    assert report.problems[0].message == (
        "No call recorded by the LLM proxy in this rollout, but the tracer recorded 1 LLM calls."
    )
