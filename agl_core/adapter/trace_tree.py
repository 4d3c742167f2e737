"""The span tree of one rollout: build it (virtual parents for missing ones), repair it, walk it.

Spans recorded by some tracers lose their parent links (an LLM call shows up next to the agent that made
it instead of under it); :meth:`TraceTree.repair_hierarchy` puts each such span under the span whose time
range encloses it most tightly. Agent boundaries come from :func:`agent_name`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agl_core.adapter._genai import AGENT_NAME
from agl_core.types import Span

__all__ = ["VIRTUAL_ROOT_ID", "TraceNode", "TraceTree", "agent_name"]

VIRTUAL_ROOT_ID = "virtual-root"
"""Span id (and name) of the synthetic root added when a trace has several roots."""


def agent_name(span: Span) -> str | None:
    """The agent a span stands for, or None; the first rule that applies wins.

    Rules: ``gen_ai.agent.name`` (OpenTelemetry GenAI); ``agent.name`` (OpenAI Agents SDK);
    ``agentops.span.kind == "agent"`` → ``operation.name``; ``recipient_agent_type`` (AutoGen);
    ``langchain.chain.type`` (LangGraph); ``executor.id`` (agent-framework); Weave ``type == "agent"``
    → ``agentlightning.operation.input.name``; a span named ``langchain.Chain.<X>`` → ``lc_name`` or X.
    """
    attrs = span.attributes
    for key in (AGENT_NAME, "agent.name"):
        if isinstance(attrs.get(key), str) and attrs[key]:
            return str(attrs[key])
    if attrs.get("agentops.span.kind") == "agent" and isinstance(attrs.get("operation.name"), str):
        return str(attrs["operation.name"])
    for key in ("recipient_agent_type", "langchain.chain.type", "executor.id"):
        if isinstance(attrs.get(key), str) and attrs[key]:
            return str(attrs[key])
    if attrs.get("type") == "agent" and isinstance(attrs.get("agentlightning.operation.input.name"), str):
        return str(attrs["agentlightning.operation.input.name"])
    if span.name.startswith("langchain.Chain."):
        lc_name = attrs.get("lc_name")
        return str(lc_name) if isinstance(lc_name, str) and lc_name else span.name[len("langchain.Chain.") :]
    return None


@dataclass(eq=False)
class TraceNode:
    """One span in the tree; ``virtual`` nodes stand for spans that were never recorded."""

    span: Span
    children: list[TraceNode] = field(default_factory=list)
    parent: TraceNode | None = None
    virtual: bool = False

    @property
    def id(self) -> str:
        """The span id."""
        return self.span.span_id

    @property
    def start(self) -> float | None:
        """Start time in seconds."""
        return self.span.start_time

    @property
    def end(self) -> float | None:
        """End time in seconds."""
        return self.span.end_time

    @property
    def duration(self) -> float | None:
        """``end - start``, or None when either is unknown."""
        return None if self.start is None or self.end is None else self.end - self.start

    def walk(self) -> Iterator[TraceNode]:
        """This node and its descendants, depth first, children in time order."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def add_child(self, child: TraceNode) -> None:
        """Attach ``child`` here, keeping children in time order."""
        child.parent = self
        self.children.append(child)
        self.children.sort(key=_time_key)


def _time_key(node: TraceNode) -> tuple[bool, float, int]:
    return (node.start is None, node.start or 0.0, node.span.sequence_id)


def _virtual_span(span_id: str, name: str, like: Span, children: Sequence[TraceNode]) -> Span:
    starts = [c.start for c in children if c.start is not None]
    ends = [c.end for c in children if c.end is not None]
    return Span.from_attributes(
        attributes={},
        rollout_id=like.rollout_id,
        attempt_id=like.attempt_id,
        name=name,
        trace_id=like.trace_id,
        span_id=span_id,
        start_time=min(starts) if starts else None,
        end_time=max(ends) if ends else None,
    )


class TraceTree:
    """The tree of one rollout's spans, rooted at a real or virtual span."""

    def __init__(self, root: TraceNode) -> None:
        self.root = root

    @classmethod
    def from_spans(cls, spans: Sequence[Span]) -> TraceTree:
        """Build the tree; missing parents become virtual nodes, several roots get a virtual root.

        Raises:
            ValueError: ``spans`` is empty.
        """
        if not spans:
            raise ValueError("No spans provided to create TraceTree.")
        nodes: dict[str, TraceNode] = {}
        for span in spans:
            nodes.setdefault(span.span_id, TraceNode(span))
        orphans: dict[str, list[TraceNode]] = {}
        roots: list[TraceNode] = []
        for node in nodes.values():
            parent_id = node.span.parent_id
            if not parent_id:
                roots.append(node)
            elif parent_id in nodes and parent_id != node.id:
                nodes[parent_id].children.append(node)
                node.parent = nodes[parent_id]
            else:
                orphans.setdefault(parent_id, []).append(node)
        for parent_id, children in orphans.items():
            virtual = TraceNode(
                _virtual_span(parent_id, "agentlightning.virtual", children[0].span, children)
            )
            virtual.virtual = True
            for child in children:
                virtual.add_child(child)
            roots.append(virtual)
        reached = {id(n) for root in roots for n in root.walk()}
        for node in nodes.values():  # spans in a parent cycle: cut the cycle, make them roots
            if id(node) not in reached and node.parent is not None:
                node.parent.children.remove(node)
                node.parent = None
                roots.append(node)
                reached.update(id(n) for n in node.walk())
        for node in nodes.values():
            node.children.sort(key=_time_key)
        roots.sort(key=_time_key)
        if len(roots) == 1:
            return cls(roots[0])
        root = TraceNode(_virtual_span(VIRTUAL_ROOT_ID, VIRTUAL_ROOT_ID, roots[0].span, roots), virtual=True)
        for child in roots:
            root.add_child(child)
        return cls(root)

    def traverse(self) -> Iterator[TraceNode]:
        """Every node, depth first from the root, children in time order."""
        return self.root.walk()

    def repair_hierarchy(self) -> None:
        """Move mis-parented top-level spans under the span that encloses them most tightly.

        Starting at the root, single-child levels are skipped (a session wrapper). Each direct child of
        the first node with several children moves under the other node (not the root itself, not one
        of its own descendants) whose time range contains it with the smallest duration strictly longer
        than its own. Spans without times are left in place.
        """
        top = self.root
        while len(top.children) == 1:
            top = top.children[0]
        candidates = [n for n in top.walk() if n is not top and n.duration is not None]
        for child in list(top.children):
            length = child.duration
            if length is None or child.start is None or child.end is None:
                continue
            own = {id(n) for n in child.walk()}
            best: TraceNode | None = None
            for cand in candidates:
                if id(cand) in own or cand.start is None or cand.end is None:
                    continue
                span_len = cand.end - cand.start
                encloses = cand.start <= child.start and cand.end >= child.end and span_len - length > 0
                if encloses and (best is None or span_len < (best.duration or 0.0)):
                    best = cand
            if best is not None:
                top.children.remove(child)
                best.add_child(child)

    def names_tuple(self) -> tuple[str, list[Any]]:
        """``(name, [children's names_tuple...])`` of the whole tree, handy in tests."""

        def rec(node: TraceNode) -> tuple[str, list[Any]]:
            return (node.span.name, [rec(child) for child in node.children])

        return rec(self.root)

    def to_json(self) -> dict[str, Any]:
        """The tree as nested ``{"span": {...}, "children": [...]}`` dicts."""

        def rec(node: TraceNode) -> dict[str, Any]:
            return {"span": node.span.model_dump(), "children": [rec(child) for child in node.children]}

        return rec(self.root)

    def format(self, *, max_depth: int = 12) -> str:
        """An indented text view (name, span id, agent) for humans."""
        lines: list[str] = []
        stack: list[tuple[TraceNode, int]] = [(self.root, 0)]
        while stack:
            node, depth = stack.pop()
            agent = agent_name(node.span)
            suffix = f"  [agent={agent}]" if agent else ""
            lines.append(f"{'  ' * min(depth, max_depth)}{node.span.name} ({node.id}){suffix}")
            stack.extend((child, depth + 1) for child in reversed(node.children))
        return "\n".join(lines)
