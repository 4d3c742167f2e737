"""0.3's ``TraceTree`` interface (``agl_core.adapter.trace_tree``), as 0.3 adapters and tests use it."""

from __future__ import annotations

import pytest

import agl_core as agl
from agl_core.adapter.trace_tree import TraceTree
from agl_core.adapter.triplet import RewardMatchPolicy


def span(name: str, span_id: str, parent: str | None, start: float, end: float, **attrs: object) -> agl.Span:
    return agl.Span.from_attributes(
        attributes=attrs,
        rollout_id="ro-1",
        attempt_id="at-1",
        name=name,
        trace_id="a" * 32,
        span_id=span_id,
        parent_id=parent,
        start_time=start,
        end_time=end,
    )


def reward(span_id: str, parent: str | None, start: float, value: float) -> agl.Span:
    return span(
        "agentlightning.annotation",
        span_id,
        parent,
        start,
        start + 0.1,
        **{"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": value},
    )


def llm(span_id: str, parent: str | None, start: float, end: float, response_id: str) -> agl.Span:
    return span(
        "openai.chat.completion",
        span_id,
        parent,
        start,
        end,
        **{
            "gen_ai.response.id": response_id,
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": f"q{span_id}",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": f"a{span_id}",
            "prompt_token_ids": [1, 2],
            "response_token_ids": [3],
        },
    )


def trace() -> list[agl.Span]:
    return [
        span("session", "s", None, 0, 100),
        span("agent", "a", "s", 1, 90, **{"agent.name": "writer"}),
        llm("l1", "s", 2, 10, "r1"),  # lost its parent: repair puts it under the agent
        reward("w1", "s", 11, 0.5),
        llm("l2", "a", 20, 30, "r2"),
        llm("l2dup", "a", 31, 32, "r2"),  # same response id: deduplicated
        reward("w2", "a", 40, 1.0),
    ]


def test_nodes_have_03_attributes() -> None:
    tree = TraceTree.from_spans(trace())
    assert tree.id == "s" and tree.span.name == "session" and tree.start_time == 0 and tree.end_time == 100
    assert [child.id for child in tree.children] == ["a", "l1", "w1"]
    assert isinstance(tree.traverse(), list) and len(tree.traverse()) == 7
    found = tree.find_id("l2")
    assert found is not None and found.span.name == "openai.chat.completion"
    assert tree.find_id("nope") is None
    agent = tree.find_id("a")
    assert agent is not None and agent.agent_name() == "writer"
    assert tree.find_id("w2").is_reward_span() and tree.find_id("w2").maybe_reward_dict() == {  # type: ignore[union-attr]
        "type": "reward",
        "value": 1.0,
    }
    data = tree.to_json()
    assert data["id"] == "s" and data["children"][0]["id"] == "a"


def test_repair_find_llm_calls_and_match_rewards() -> None:
    tree = TraceTree.from_spans(trace())
    tree.repair_hierarchy()
    assert tree.names_tuple()[1][0][0] == "agent [writer]"
    assert [child.id for child in tree.find_id("a").children][:2] == ["l1", "w1"]  # type: ignore[union-attr]
    calls = tree.find_llm_calls(
        llm_call_match=r"openai\.chat\.completion",
        agent_match="writer",
        within_reward=False,
        within_llm_call=False,
        existing_llm_call_response_ids=set(),
    )
    assert [(node.id, agent) for node, agent in calls] == [("l1", "writer"), ("l2", "writer")]
    assert tree.find_llm_calls(llm_call_match="openai", agent_match="reader") == []
    rewards = tree.match_rewards(RewardMatchPolicy.FIRST_OCCURRENCE, [node for node, _ in calls])
    assert rewards == {"l1": 0.5, "l2": 1.0}


def test_to_trajectory_builds_triplets_with_rewards() -> None:
    tree = TraceTree.from_spans(trace())
    tree.repair_hierarchy()
    triplets = tree.to_trajectory(llm_call_match=r"openai\.chat\.completion", final_reward=2.0)
    assert [t.reward for t in triplets] == [0.5, 2.0]
    first = triplets[0]
    assert first.prompt["token_ids"] == [1, 2] and first.response["token_ids"] == [3]
    assert first.prompt["raw_content"] == [{"role": "user", "content": "ql1"}]
    assert first.metadata["response_id"] == "r1" and first.metadata["agent_name"] == "writer"
    assert tree.to_trajectory() == tree.to_trajectory(
        llm_call_match=r"openai\.chat\.completion", final_reward=None
    )


def test_tracer_trace_to_triplet_still_agrees() -> None:
    triplets = agl.TracerTraceToTriplet(llm_call_match=r"openai\.chat\.completion").adapt(trace())
    assert [t.reward for t in triplets] == [0.5, 1.0]


def test_visualize_needs_graphviz_and_says_so() -> None:
    tree = TraceTree.from_spans(trace())
    try:
        import graphviz  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install graphviz"):
            tree.visualize("unused")


def test_prompt_image_urls_from_content_recorded_as_a_json_string() -> None:
    """0.3 instrumentors recorded multimodal content as a JSON string; 0.3's reader decoded it."""
    import json

    parts = [
        {"type": "text", "text": "What is in the chart?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    tree = TraceTree.from_spans([agl.Span.from_attributes(attributes={}, name="root")])
    url = ["data:image/png;base64,AAAA"]
    as_string = {"0": {"role": "user", "content": json.dumps(parts)}, "prompt_filter_results": {}}
    assert tree.extract_prompt_image_urls(as_string) == url
    assert tree.extract_prompt_image_urls([{"role": "user", "content": parts}]) == url
    assert tree.extract_prompt_image_urls([{"role": "user", "content": "[not json"}]) == []
