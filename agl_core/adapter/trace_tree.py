"""The span tree of one rollout: build it (virtual parents for missing ones), repair it, walk it.

Spans recorded by some tracers lose their parent links (an LLM call shows up next to the agent that made
it instead of under it); :meth:`TraceTree.repair_hierarchy` puts each such span under the span whose time
range encloses it most tightly. Agent boundaries come from :func:`agent_name`.

`TraceTree` is a node of the tree, with Agent Lightning 0.3's public interface (``id``, ``span``,
``children``, ``from_spans``, ``find_llm_calls``, ``match_rewards``, ``to_trajectory``, ...). ``TraceNode``
is the same class under agl's earlier name.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from agl_core.adapter import _genai
from agl_core.adapter._genai import AGENT_NAME
from agl_core.emitter.reward import get_reward_value
from agl_core.semconv import AGL_OPERATION, AGL_REWARD, LightningSpanAttributes
from agl_core.types import Span, Triplet

if TYPE_CHECKING:
    from agl_core.adapter.triplet import RewardMatchPolicy

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


def _time_key(node: TraceTree) -> tuple[bool, float, int]:
    return (node.start is None, node.start or 0.0, node.span.sequence_id)


def _virtual_span(span_id: str, name: str, like: Span, children: Sequence[TraceTree]) -> Span:
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
    """One span and its descendants; the tree of a rollout is the node returned by `from_spans`.

    Args:
        id: the span id (a virtual node's made-up id).
        span: the span of this node.
        children: child nodes (kept in start-time order by `add_child`).
        virtual: the node stands for a span that was never recorded (a missing parent, the root
            joining several roots).
    """

    def __init__(
        self,
        id: str,
        span: Span,
        children: list[TraceTree] | None = None,
        *,
        virtual: bool = False,
    ) -> None:
        self.id = id
        self.span = span
        self.children: list[TraceTree] = []
        self.parent: TraceTree | None = None
        self.virtual = virtual
        for child in children or []:
            self.add_child(child)

    # ------------------------------------------------------------------ node basics

    @property
    def root(self) -> TraceTree:
        """The topmost node above (or at) this one."""
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    @property
    def start_time(self) -> float | None:
        """Start time of the span in seconds."""
        return self.span.start_time

    @property
    def end_time(self) -> float | None:
        """End time of the span in seconds."""
        return self.span.end_time

    start = start_time
    end = end_time

    @property
    def duration(self) -> float | None:
        """``end - start``, or None when either is unknown."""
        return None if self.start is None or self.end is None else self.end - self.start

    def add_child(self, child: TraceTree) -> None:
        """Attach ``child`` here, keeping children in time order."""
        child.parent = self
        self.children.append(child)
        self.children.sort(key=_time_key)

    def walk(self) -> Iterator[TraceTree]:
        """This node and its descendants, depth first, children in time order."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def traverse(self) -> list[TraceTree]:
        """Every node from this one down, depth first (a list, as in 0.3)."""
        return list(self.walk())

    def find_id(self, id: str) -> TraceTree | None:
        """The node with span id ``id`` in this subtree, or None."""
        return next((node for node in self.walk() if node.id == id), None)

    def agent_name(self) -> str | None:
        """The agent this span stands for (see the module function :func:`agent_name`); None if virtual."""
        return None if self.virtual else agent_name(self.span)

    def maybe_reward_dict(self) -> dict[str, Any]:
        """``{"type": "reward", "value": v}`` when the span carries a reward, else ``{}``."""
        value = None if self.virtual else get_reward_value(self.span)
        return {"type": "reward", "value": value} if value is not None else {}

    def is_reward_span(self) -> bool:
        """The span carries a reward, or is the ``agentlightning.operation`` of a reward function."""
        if self.maybe_reward_dict():
            return True
        operation = self.span.attributes.get(LightningSpanAttributes.OPERATION_NAME.value)
        return self.span.name == AGL_OPERATION and operation == AGL_REWARD

    # ------------------------------------------------------------------ building

    @classmethod
    def from_spans(cls, spans: Sequence[Span]) -> TraceTree:
        """Build the tree; missing parents become virtual nodes, several roots get a virtual root.

        Raises:
            ValueError: ``spans`` is empty.
        """
        if not spans:
            raise ValueError("No spans provided to create TraceTree.")
        nodes: dict[str, TraceTree] = {}
        for span in spans:
            nodes.setdefault(span.span_id, cls(span.span_id, span))
        orphans: dict[str, list[TraceTree]] = {}
        roots: list[TraceTree] = []
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
            span = _virtual_span(parent_id, "agentlightning.virtual", children[0].span, children)
            roots.append(cls(parent_id, span, children, virtual=True))
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
            return roots[0]
        span = _virtual_span(VIRTUAL_ROOT_ID, VIRTUAL_ROOT_ID, roots[0].span, roots)
        return cls(VIRTUAL_ROOT_ID, span, roots, virtual=True)

    def repair_hierarchy(self) -> None:
        """Move mis-parented top-level spans under the span that encloses them most tightly.

        Starting here, single-child levels are skipped (a session wrapper). Each direct child of the
        first node with several children moves under the other node (not that node itself, not one of
        the child's own descendants) whose time range contains it with the smallest duration strictly
        longer than its own. Spans without times are left in place.
        """
        top = self
        while len(top.children) == 1:
            top = top.children[0]
        candidates = [n for n in top.walk() if n is not top and n.duration is not None]
        for child in list(top.children):
            length = child.duration
            if length is None or child.start is None or child.end is None:
                continue
            own = {id(n) for n in child.walk()}
            best: TraceTree | None = None
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

    # ------------------------------------------------------------------ 0.3's trajectory API

    def find_llm_calls(
        self,
        *,
        llm_call_match: str,
        agent_match: str | None,
        within_matching_subtree: str | None = None,
        within_reward: bool | None = None,
        within_llm_call: bool | None = None,
        existing_llm_call_response_ids: set[str] | None = None,
    ) -> list[tuple[TraceTree, str]]:
        """LLM-call nodes under this one with the agent they belong to, as Agent Lightning 0.3 found them.

        A node is an LLM call when ``llm_call_match`` is found in its span name, it lies inside an agent
        subtree whose name matches ``agent_match`` (``within_matching_subtree`` carries that agent's
        name; pass ``"*"`` to start inside one), and it is not inside a reward span when
        ``within_reward`` is False (None: do not check). With ``within_llm_call`` not None, an LLM span
        nested in another one is skipped unless it has its own response id; a response id already in
        ``existing_llm_call_response_ids`` is skipped (the set is updated).
        """
        pattern = re.compile(llm_call_match)
        agent_pattern = re.compile(agent_match) if agent_match is not None else None
        seen = existing_llm_call_response_ids if existing_llm_call_response_ids is not None else set()
        found: list[tuple[TraceTree, str]] = []
        stack: list[tuple[TraceTree, str | None, bool | None, bool | None]] = [
            (self, within_matching_subtree, within_reward, within_llm_call)
        ]
        while stack:
            node, agent, in_reward, in_llm = stack.pop()
            candidate = not node.virtual and in_reward is not True
            if candidate and agent is not None and pattern.search(node.span.name):
                response_id = _genai.response_id(node.span)
                nested_twin = response_id is None and in_llm is True
                if not nested_twin and (response_id is None or response_id not in seen):
                    found.append((node, agent))
                    if response_id is not None:
                        seen.add(response_id)
                    if in_llm is not None:
                        in_llm = True
            name = node.agent_name()
            if name is not None:
                agent = name if agent_pattern is None or agent_pattern.search(name) else None
            if in_reward is not None and node.is_reward_span():
                in_reward = True
            stack.extend((child, agent, in_reward, in_llm) for child in reversed(node.children))
        return found

    def match_rewards(
        self, reward_match: str | RewardMatchPolicy, llm_calls: Sequence[TraceTree]
    ) -> dict[str, float | None]:
        """Span id of an LLM call -> the reward it receives, by policy (``first_occurrence`` or
        ``first_sibling``): a reward goes to the latest call that ended at or before the reward started
        and has none yet, over all nodes in time order or among one node's children."""
        from agl_core.adapter.triplet import RewardMatchPolicy

        policy = RewardMatchPolicy(reward_match)
        call_ids = {call.id for call in llm_calls}
        rewards: dict[str, float | None] = {}
        if policy is RewardMatchPolicy.FIRST_OCCURRENCE:
            groups = [self.traverse()]
        else:
            groups = [node.children for node in self.walk() if node.children]
        for group in groups:
            ended: list[TraceTree] = []
            for node in sorted(group, key=_time_key):
                if node.id in call_ids:
                    ended.append(node)
                reward = node.maybe_reward_dict()
                if not reward or node.start is None:
                    continue
                for call in reversed(ended):
                    if call.end is not None and call.end <= node.start and call.id not in rewards:
                        rewards[call.id] = reward["value"]
                        break
        return rewards

    def extract_prompt_image_urls(self, prompt_raw_content: Any) -> list[str]:
        """Image URLs in prompt messages (a list of messages, or a dict keyed "0", "1", ...), in order.

        A message's ``content`` may be the list of parts or that list as a JSON string.
        """
        if isinstance(prompt_raw_content, dict):
            numeric = sorted((k for k in prompt_raw_content if str(k).isdigit()), key=int)
            messages = [prompt_raw_content[k] for k in numeric] if numeric else [prompt_raw_content]
        elif isinstance(prompt_raw_content, list):
            messages = prompt_raw_content
        else:
            return []
        decoded = []
        for message in messages:
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            if isinstance(content, str) and content.lstrip().startswith("["):
                with contextlib.suppress(ValueError):  # a JSON string, as 0.3's reader accepted
                    message = {**message, "content": json.loads(content)}
            decoded.append(message)
        return _genai.image_urls(decoded)

    def span_to_triplet(self, span: Span, agent_name: str | None) -> Triplet:
        """The triplet of one LLM-call span (the format of ``TracerTraceToTriplet.span_to_triplet``)."""
        from agl_core.adapter.triplet import TracerTraceToTriplet

        return TracerTraceToTriplet().span_to_triplet(span, agent_name)

    def to_trajectory(
        self,
        llm_call_match: str | None = None,
        agent_match: str | None = None,
        exclude_llm_call_in_reward: bool = True,
        dedup_llm_call: bool = True,
        reward_match: str | RewardMatchPolicy = "first_occurrence",
        final_reward: float | None = None,
        _skip_empty_token_spans: bool = False,
    ) -> list[Triplet]:
        """The triplets of the LLM calls under this node, with rewards matched (0.3's API).

        ``llm_call_match`` defaults to ``DEFAULT_LLM_CALL_MATCH`` of :mod:`agl_core.adapter.triplet`
        (agl's span names and 0.3's ``openai.chat.completion``). ``final_reward`` replaces the reward of
        the last triplet; ``_skip_empty_token_spans`` drops calls without prompt or response token ids.
        """
        from agl_core.adapter.triplet import DEFAULT_LLM_CALL_MATCH

        calls = self.find_llm_calls(
            llm_call_match=llm_call_match or DEFAULT_LLM_CALL_MATCH,
            agent_match=agent_match,
            within_matching_subtree="*" if agent_match is None else None,
            within_reward=False if exclude_llm_call_in_reward else None,
            within_llm_call=False if dedup_llm_call else None,
            existing_llm_call_response_ids=set(),
        )
        kept: list[tuple[TraceTree, Triplet]] = []
        for node, agent in calls:
            triplet = self.span_to_triplet(node.span, agent)
            if _skip_empty_token_spans and not (
                triplet.prompt["token_ids"] and triplet.response["token_ids"]
            ):
                continue
            kept.append((node, triplet))
        rewards = self.match_rewards(reward_match, [node for node, _ in kept])
        triplets = [t.model_copy(update={"reward": rewards.get(node.id)}) for node, t in kept]
        if final_reward is not None and triplets:
            triplets[-1] = triplets[-1].model_copy(update={"reward": final_reward})
        return triplets

    # ------------------------------------------------------------------ views

    def names_tuple(self) -> tuple[str, list[Any]]:
        """``(name, [children's names_tuple...])``; an agent span's name ends with `` [agent]`` (0.3)."""
        agent = self.agent_name()
        name = f"{self.span.name} [{agent}]" if agent is not None else self.span.name
        return (name, [child.names_tuple() for child in self.children])

    def to_json(self) -> dict[str, Any]:
        """The tree as nested ``{"id", "span": {...}, "children": [...]}`` dicts."""
        return {
            "id": self.id,
            "span": self.span.model_dump(),
            "children": [child.to_json() for child in self.children],
        }

    def format(self, *, max_depth: int = 12) -> str:
        """An indented text view (name, span id, agent) for humans."""
        lines: list[str] = []
        stack: list[tuple[TraceTree, int]] = [(self, 0)]
        while stack:
            node, depth = stack.pop()
            agent = node.agent_name()
            suffix = f"  [agent={agent}]" if agent else ""
            lines.append(f"{'  ' * min(depth, max_depth)}{node.span.name} ({node.id}){suffix}")
            stack.extend((child, depth + 1) for child in reversed(node.children))
        return "\n".join(lines)

    def visualize(self, filename: str, interested_span_match: str | None = None) -> None:
        """Render the tree to ``<filename>.png`` with Graphviz (``pip install graphviz`` and the ``dot``
        program); with ``interested_span_match`` only matching spans and their ancestors are drawn."""
        try:
            import graphviz
        except ImportError as exc:
            raise ImportError(
                "TraceTree.visualize needs the graphviz package: pip install graphviz (and Graphviz's dot). "
                "TraceTree.format() gives a text view without it."
            ) from exc
        pattern = re.compile(interested_span_match) if interested_span_match else None
        keep = {id(n) for n in self.walk() if pattern is None or pattern.search(n.span.name)}
        for node in reversed(self.traverse()):  # ancestors of kept nodes are kept too
            if any(id(child) in keep for child in node.children):
                keep.add(id(node))
        dot = graphviz.Digraph(comment="Trace Tree")
        for node in self.walk():
            if id(node) not in keep:
                continue
            agent = node.agent_name()
            dot.node(node.id, f"{node.id[-8:]} ({node.span.name})" + (f" [{agent}]" if agent else ""))
            if node.parent is not None and id(node.parent) in keep and node is not self:
                dot.edge(node.parent.id, node.id)
        dot.render(filename, format="png", cleanup=True)

    def __repr__(self) -> str:
        return (
            f"TraceTree(id={self.id!r}, name={self.span.name!r}, start_time={self.start_time}, "
            f"end_time={self.end_time}, children={len(self.children)})"
        )


TraceNode = TraceTree
"""agl's earlier name of a tree node; the same class as `TraceTree`."""
