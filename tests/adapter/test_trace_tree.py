"""TraceTree: building from spans (virtual parents and roots), hierarchy repair, agent names."""

from __future__ import annotations

import pytest

from agl_core.adapter import TraceTree, agent_name
from agl_core.types import Span
from tests.adapter.traces import TraceBuilder


def span(name: str, span_id: str, parent: str | None, start: float, end: float, **attrs: object) -> Span:
    return Span.from_attributes(
        attributes=attrs,
        name=name,
        trace_id="t" * 32,
        span_id=span_id,
        parent_id=parent,
        start_time=start,
        end_time=end,
    )


def test_empty_input_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"No spans provided to create TraceTree\."):
        TraceTree.from_spans([])


def test_missing_parent_becomes_a_virtual_node_and_several_roots_a_virtual_root() -> None:
    tree = TraceTree.from_spans(
        [span("a", "a1", None, 0, 10), span("b", "b1", "gone", 2, 3), span("c", "c1", "gone", 4, 6)]
    )
    assert tree.root.virtual and tree.root.id == "virtual-root"
    assert tree.names_tuple() == (
        "virtual-root",
        [("a", []), ("agentlightning.virtual", [("b", []), ("c", [])])],
    )
    virtual = tree.root.children[1]
    assert (virtual.id, virtual.start, virtual.end, virtual.virtual) == ("gone", 2, 6, True)


def test_children_are_in_time_order_and_cycles_are_cut() -> None:
    tree = TraceTree.from_spans(
        [span("late", "l", "p", 5, 6), span("p", "p", None, 0, 9), span("early", "e", "p", 1, 2)]
    )
    assert tree.names_tuple() == ("p", [("early", []), ("late", [])])
    cyclic = TraceTree.from_spans([span("x", "x", "y", 0, 1), span("y", "y", "x", 0, 2)])
    assert sorted(n.id for n in cyclic.traverse()) == ["x", "y"]


def test_repair_moves_top_level_spans_under_the_tightest_enclosing_span() -> None:
    spans = [
        span("session", "s", None, 0, 100),
        span("agent", "a", "s", 10, 50),
        span("step", "st", "a", 20, 40),
        span("llm", "l", "s", 25, 30),  # lost its parent: "step" is the tightest enclosing span
        span("same-length", "q", "s", 20, 40),  # as long as "step", so not under it (strictly longer only)
        span("outside", "o", "s", 60, 70),
    ]
    tree = TraceTree.from_spans(spans)
    tree.repair_hierarchy()
    assert tree.names_tuple() == (
        "session",
        [("agent", [("step", [("llm", [])]), ("same-length", [])]), ("outside", [])],
    )


def test_agent_name_rules() -> None:
    assert agent_name(span("x", "1", None, 0, 1, **{"gen_ai.agent.name": "g"})) == "g"
    assert agent_name(span("x", "1", None, 0, 1, **{"agent.name": "openai-agents"})) == "openai-agents"
    kind = {"agentops.span.kind": "agent", "operation.name": "ops"}
    assert agent_name(span("x", "1", None, 0, 1, **kind)) == "ops"
    assert agent_name(span("x", "1", None, 0, 1, recipient_agent_type="autogen")) == "autogen"
    assert agent_name(span("x", "1", None, 0, 1, **{"langchain.chain.type": "graph"})) == "graph"
    assert agent_name(span("x", "1", None, 0, 1, **{"executor.id": "exec"})) == "exec"
    weave = {"type": "agent", "agentlightning.operation.input.name": "weave"}
    assert agent_name(span("x", "1", None, 0, 1, **weave)) == "weave"
    assert agent_name(span("langchain.Chain.Planner", "1", None, 0, 1)) == "Planner"
    assert agent_name(span("langchain.Chain.X", "1", None, 0, 1, lc_name="Named")) == "Named"
    assert agent_name(span("chat qwen", "1", None, 0, 1)) is None


def test_tree_of_sdk_spans_keeps_real_parent_links() -> None:
    b = TraceBuilder()
    with b.span("root", 0, 10), b.agent("a", 1, 9):
        b.llm(2, 3, [{"role": "user", "content": "x"}])
    tree = TraceTree.from_spans(b.spans())
    # 0.3 marks agent spans with " [agent]" in names_tuple
    assert tree.names_tuple() == ("root", [("invoke_agent a [a]", [("chat qwen", [])])])
    data = tree.to_json()
    assert (
        data["span"]["name"] == "root" and data["children"][0]["children"][0]["span"]["name"] == "chat qwen"
    )
