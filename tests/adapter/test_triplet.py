"""TracerTraceToTriplet on realistic multi-agent traces recorded with the OpenTelemetry SDK."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agl_core.adapter import RewardMatchPolicy, TracerTraceToTriplet
from agl_core.types import Triplet
from tests.adapter.traces import TraceBuilder, user

SYSTEM = {"role": "system", "content": "You plan trips."}
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        },
    }
]
CALL = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q": "Paris"}'}}


def multi_agent_trace() -> TraceBuilder:
    """planner (tool call, an LLM call inside the tool, answer), mid reward, critic, final reward."""
    b = TraceBuilder()
    with b.span("rollout", 0, 100):
        with b.agent("planner", 1, 40):
            first = [SYSTEM, user("Plan a trip")]
            b.llm(2, 10, first, None, response_id="r1", tool_calls=[CALL], tools=TOOLS, response_ids=[10, 11])
            with b.span("execute_tool search", 11, 15, **{"gen_ai.operation.name": "execute_tool"}):
                summary = [user("Summarize: Paris, Rome")]
                b.llm(
                    12, 14, summary, "Paris is nice", response_id="r2", prompt_ids=[7, 8], response_ids=[12]
                )
            history = [
                SYSTEM,
                user("Plan a trip"),
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "call_1", "content": "Paris is nice"},
            ]
            ids = [1, 2, 3, 10, 11, 20, 21]
            b.llm(
                16,
                25,
                history,
                "Go to Paris",
                response_id="r3",
                tools=TOOLS,
                prompt_ids=ids,
                response_ids=[13],
            )
        b.reward(26, 0.5)
        with b.agent("critic", 41, 60):
            critique = [user("Critique: Go to Paris")]
            b.llm(42, 50, critique, "Looks good", response_id="r4", prompt_ids=[30], response_ids=[31])
        b.reward(70, 1.0)
    return b


def by_id(triplets: list[Triplet]) -> dict[str, Triplet]:
    return {t.metadata["response_id"]: t for t in triplets}


def test_every_llm_call_becomes_a_triplet_in_call_order() -> None:
    triplets = TracerTraceToTriplet().adapt(multi_agent_trace().spans())
    assert [t.metadata["response_id"] for t in triplets] == ["r1", "r2", "r3", "r4"]
    assert [t.metadata["agent_name"] for t in triplets] == ["planner", "planner", "planner", "critic"]
    # FIRST_OCCURRENCE: the mid-rollout reward goes to the last call that ended before it, the end one to r4
    assert [t.reward for t in triplets] == [None, None, 0.5, 1.0]
    first = triplets[0]
    assert first.prompt == {
        "token_ids": [1, 2, 3],
        "raw_content": [SYSTEM, user("Plan a trip")],
        "image_urls": [],
    }
    assert first.response["token_ids"] == [10, 11]
    assert first.response["raw_content"] == [{"role": "assistant", "content": None, "tool_calls": [CALL]}]
    assert first.metadata["request"]["model"] == "qwen"
    assert json.loads(first.metadata["request"]["tools"]) == TOOLS
    assert first.metadata["response"]["id"] == "r1"
    assert first.metadata["source"] == "tracer"


def test_tool_results_and_calls_appear_in_the_next_prompt() -> None:
    third = by_id(TracerTraceToTriplet().adapt(multi_agent_trace().spans()))["r3"]
    assert third.prompt["raw_content"][2:] == [
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Paris is nice"},
    ]
    assert third.response["raw_content"] == [{"role": "assistant", "content": "Go to Paris"}]


def test_agent_match_selects_one_agent_and_rewards_follow_first_occurrence() -> None:
    spans = multi_agent_trace().spans()
    planner = TracerTraceToTriplet(agent_match="^planner$").adapt(spans)
    assert [t.metadata["response_id"] for t in planner] == ["r1", "r2", "r3"]
    # the end reward cannot go to r4 (excluded) nor r3 (already rewarded): the latest unrewarded call is r2
    assert [t.reward for t in planner] == [None, 1.0, 0.5]
    critic = TracerTraceToTriplet(agent_match="critic").adapt(spans)
    assert [(t.metadata["response_id"], t.reward) for t in critic] == [("r4", 1.0)]


def test_agent_match_uses_the_nearest_enclosing_agent() -> None:
    b = TraceBuilder()
    with b.agent("orchestrator", 0, 50, key="agent.name"):  # OpenAI Agents SDK attribute
        b.llm(1, 5, [user("route")], "to worker", response_id="o1")
        with b.span("worker", 6, 30, **{"agentops.span.kind": "agent", "operation.name": "worker"}):
            b.llm(7, 10, [user("work")], "done", response_id="w1")
            with b.agent("orchestrator-inner", 11, 20, key="recipient_agent_type"):  # AutoGen
                b.llm(12, 15, [user("check")], "ok", response_id="o2")
    spans = b.spans()
    worker = TracerTraceToTriplet(agent_match="^worker$").adapt(spans)
    assert [(t.metadata["response_id"], t.metadata["agent_name"]) for t in worker] == [("w1", "worker")]
    orch = TracerTraceToTriplet(agent_match="^orchestrator").adapt(spans)
    assert [t.metadata["response_id"] for t in orch] == ["o1", "o2"]
    assert [t.metadata["agent_name"] for t in TracerTraceToTriplet().adapt(spans)] == [
        "orchestrator",
        "worker",
        "orchestrator-inner",
    ]


def first_sibling_trace() -> TraceBuilder:
    b = TraceBuilder()
    with b.span("rollout", 0, 100):
        with b.agent("solver", 1, 40):
            b.llm(2, 10, [user("step 1")], "a", response_id="s1")
            b.reward(11, 0.3)
            b.llm(12, 20, [user("step 2")], "b", response_id="s2")
        b.reward(50, 1.0)
    return b


def test_reward_policies_differ_on_rewards_outside_the_calls_parent() -> None:
    spans = first_sibling_trace().spans()
    occurrence = TracerTraceToTriplet(reward_match=RewardMatchPolicy.FIRST_OCCURRENCE).adapt(spans)
    assert [t.reward for t in occurrence] == [0.3, 1.0]
    sibling = TracerTraceToTriplet(reward_match="first_sibling").adapt(spans)
    assert [t.reward for t in sibling] == [0.3, None]
    report = TracerTraceToTriplet(reward_match="first_sibling").diagnose(spans)
    problem = report.get("reward_unattributed")
    assert problem is not None and problem.severity == "warning"
    assert "no LLM call among its sibling spans ended before it (policy first_sibling)" in problem.message


def test_unknown_reward_policy_is_a_clear_error() -> None:
    with pytest.raises(
        ValueError, match="Unknown reward_match 'last'; use one of: first_occurrence, first_sibling"
    ):
        TracerTraceToTriplet(reward_match="last")
    with pytest.raises(ValueError, match="Invalid regular expression '\\('"):
        TracerTraceToTriplet(agent_match="(")


def test_llm_calls_inside_a_reward_function_are_excluded_by_default() -> None:
    b = TraceBuilder()
    with b.agent("solver", 0, 100):
        b.llm(1, 10, [user("solve")], "42", response_id="a1")
        attrs = {"agentlightning.operation.name": "agentlightning.reward"}
        with b.span("agentlightning.operation", 11, 30, **attrs):
            b.llm(12, 20, [user("Is 42 right?")], "yes", response_id="judge")
        b.reward(31, 0.8)
    spans = b.spans()
    kept = TracerTraceToTriplet().adapt(spans)
    assert [(t.metadata["response_id"], t.reward) for t in kept] == [("a1", 0.8)]
    everything = TracerTraceToTriplet(exclude_llm_call_in_reward=False).adapt(spans)
    assert [(t.metadata["response_id"], t.reward) for t in everything] == [("a1", None), ("judge", 0.8)]


def test_nested_wrappers_and_repeated_response_ids_are_deduplicated() -> None:
    b = TraceBuilder()
    outer = b.llm_attributes([user("hi")], "hello", response_id="r1")
    proxy = b.llm_attributes([user("hi")], "hello", response_id="r1", source="proxy")
    with b.agent("solver", 0, 100):
        # a 0.3-style wrapper without a response id nested in the call
        with b.span("chat qwen", 1, 20, **outer), b.span("openai.chat.completion", 2, 19):
            pass
        # the LLM proxy recorded the same call (same response id) in its own trace
        b.root_span("agl.llm_proxy.request", 3, 18, **proxy)
        b.llm(30, 40, [user("again")], "bye", response_id="r2")
    triplets, report = TracerTraceToTriplet().adapt_with_report(b.spans())
    assert [t.metadata["response_id"] for t in triplets] == ["r1", "r2"]
    # the proxy's copy of r1 is read; the 0.3 wrapper is a second tracer record of the same call
    assert report.codes() == ["no_reward", "nested_llm_calls"]
    assert [t.metadata["source"] for t in triplets] == ["proxy", "tracer"]
    nested = report.get("nested_llm_calls")
    assert nested is not None
    assert nested.message.startswith("1 LLM-call spans record the same call as a span they are nested in")
    assert report.llm_span_count == 2  # four records, two model calls


def test_a_repeated_response_id_on_one_path_is_reported() -> None:
    b = TraceBuilder()
    with b.agent("solver", 0, 100):
        b.llm(1, 10, [user("hi")], "hello", response_id="r1")
        b.llm(11, 20, [user("hi")], "hello", response_id="r1")
    triplets, report = TracerTraceToTriplet().adapt_with_report(b.spans())
    assert len(triplets) == 1
    duplicate = report.get("duplicate_llm_calls")
    assert duplicate is not None
    assert duplicate.message == "1 LLM-call spans repeat a response id already used and were skipped."


def test_images_in_prompts_are_listed() -> None:
    b = TraceBuilder()
    image = "https://example.com/cat.png"
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": image}},
        ],
    }
    b.llm(0, 5, [message], "A cat.", response_id="v1")
    legacy = {
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": json.dumps(
            [
                {"type": "text", "text": "And this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
            ]
        ),
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "A dog.",
        "gen_ai.response.id": "v2",
        "prompt_token_ids": [1],
        "response_token_ids": [2],
    }
    with b.span("openai.chat.completion", 6, 9, **legacy):
        pass
    first, second = TracerTraceToTriplet().adapt(b.spans())
    assert first.prompt["image_urls"] == [image]
    assert first.prompt["raw_content"] == [message]
    assert second.prompt["image_urls"] == ["data:image/png;base64,AA"]
    assert second.response["raw_content"] == [{"role": "assistant", "content": "A dog."}]


def test_agent_lightning_03_trace_with_flattened_attributes() -> None:
    b = TraceBuilder()
    with b.span("agent run", 0, 20, **{"agent.name": "sql_agent"}):
        attrs = {
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "Write SQL.",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": "Count users",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "SELECT COUNT(*) FROM users",
            "gen_ai.completion.0.finish_reason": "stop",
            "gen_ai.request.model": "qwen",
            "gen_ai.response.id": "legacy-1",
            "prompt_token_ids": [5, 6, 7],
            "response_token_ids": [8, 9],
        }
        with b.span("openai.chat.completion", 1, 10, **attrs):
            pass
        with b.span("agentlightning.annotation", 11, 11, reward=1.0):  # the 0.2 reward form
            pass
    (triplet,) = TracerTraceToTriplet(agent_match="sql").adapt(b.spans())
    assert triplet.prompt["raw_content"] == [
        {"role": "system", "content": "Write SQL."},
        {"role": "user", "content": "Count users"},
    ]
    assert triplet.prompt["token_ids"] == [5, 6, 7] and triplet.response["token_ids"] == [8, 9]
    assert triplet.reward == 1.0 and triplet.metadata["agent_name"] == "sql_agent"


def test_hierarchy_repair_puts_orphaned_llm_calls_under_their_agent() -> None:
    b = TraceBuilder()
    with b.agent("solver", 0, 50):
        pass
    b.root_span("chat qwen", 10, 20, **b.llm_attributes([user("x")], "y", response_id="lost"))
    spans = b.spans()
    repaired = TracerTraceToTriplet(agent_match="solver").adapt(spans)
    assert [(t.metadata["response_id"], t.metadata["agent_name"]) for t in repaired] == [("lost", "solver")]
    assert TracerTraceToTriplet(agent_match="solver", repair_hierarchy=False).adapt(spans) == []


def test_skip_empty_token_spans_moves_the_reward_to_a_call_with_ids() -> None:
    b = TraceBuilder()
    b.llm(0, 5, [user("a")], "b", response_id="with-ids")
    b.llm(6, 10, [user("c")], "d", response_id="no-ids", prompt_ids=None, response_ids=None)
    b.reward(11, 1.0)
    spans = b.spans()
    assert [t.reward for t in TracerTraceToTriplet().adapt(spans)] == [None, 1.0]
    kept = TracerTraceToTriplet(_skip_empty_token_spans=True).adapt(spans)
    assert [(t.metadata["response_id"], t.reward) for t in kept] == [("with-ids", 1.0)]


def test_readable_spans_are_accepted_and_logprobs_kept() -> None:
    b = TraceBuilder()
    logprobs = [{"token": "ok", "logprob": -0.1, "bytes": [111, 107], "top_logprobs": []}]
    b.llm(0, 1, [user("hi")], "ok", logprobs=logprobs, response_ids=[9])
    (from_otel,) = TracerTraceToTriplet().adapt(b.finished())
    assert from_otel.response["logprobs"] == logprobs
    assert from_otel.metadata["sequence_id"] == 0  # ReadableSpans carry no store identity
    with pytest.raises(TypeError, match="Adapters take Span or OpenTelemetry ReadableSpan objects, got dict"):
        TracerTraceToTriplet().adapt([{"name": "chat"}])  # type: ignore[list-item]


def test_empty_input_gives_no_triplets_and_visualize_shows_the_tree() -> None:
    assert TracerTraceToTriplet().adapt([]) == []
    text = TracerTraceToTriplet().visualize(first_sibling_trace().spans())
    lines = text.splitlines()
    assert lines[0].startswith("rollout (")
    assert lines[1].strip().startswith("invoke_agent solver (") and lines[1].endswith("[agent=solver]")
    assert sum("chat qwen" in line for line in lines) == 2
