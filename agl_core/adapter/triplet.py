"""``TracerTraceToTriplet``: one rollout's tracer spans → (prompt, response, reward) triplets.

Pipeline: build the :class:`~agl_core.adapter.trace_tree.TraceTree` (optionally repairing the
hierarchy), select LLM-call spans (``llm_call_match``, ``agent_match``, not inside reward spans, one per
response id), turn each into a :class:`~agl_core.types.Triplet`, then give each reward span to an LLM
call according to a :class:`RewardMatchPolicy`. :meth:`TracerTraceToTriplet.adapt_with_report` also
explains every decision (see :mod:`agl_core.adapter.diagnostics`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import BaseModel

from agl_core.adapter import genai as _genai
from agl_core.adapter.base import TraceToTripletBase, to_spans
from agl_core.adapter.diagnostics import AdapterReport, AdaptRecord, DroppedCall, RewardOutcome, build_report
from agl_core.adapter.trace_tree import TraceNode, TraceTree, agent_name
from agl_core.emitter import get_reward_value, is_reward_span
from agl_core.semconv import AGL_OPERATION, AGL_REWARD, LightningSpanAttributes
from agl_core.types import Span, SpanLike, Triplet
from agl_core.utils.otel import filter_and_unflatten_attributes

__all__ = ["DEFAULT_LLM_CALL_MATCH", "RewardMatchPolicy", "TracerTraceToTriplet"]

DEFAULT_LLM_CALL_MATCH = r"^(chat|text_completion)( |$)|^agl\.llm_proxy\.request$|openai\.chat\.completion"
"""The default ``llm_call_match``. With it, LLM calls are found by their attributes, in every shape the
normalisation layer reads (:func:`agl_core.adapter.genai.is_llm_span`), whatever the span's name; the
names above (OTel GenAI ``chat {model}``, the LLM proxy's span, 0.3's ``openai.chat.completion``) are
among them."""


class RewardMatchPolicy(str, Enum):
    """How a reward span finds the LLM call it scores."""

    FIRST_OCCURRENCE = "first_occurrence"
    """Over all spans in start-time order, a reward goes to the latest LLM call that ended at or before the
    reward started and has no reward yet."""
    FIRST_SIBLING = "first_sibling"
    """The same rule among the children of each span only (the reward and the call share a parent)."""


@dataclass
class _Call:
    node: TraceNode
    agent: str | None
    triplet: Triplet | None = None
    reward: float | None = None


class TracerTraceToTriplet(TraceToTripletBase):
    """Turn tracer spans into triplets, one per selected LLM call.

    Args:
        repair_hierarchy: re-parent top-level spans by time (see ``TraceTree.repair_hierarchy``).
        llm_call_match: how LLM calls are found. The default (:data:`DEFAULT_LLM_CALL_MATCH`) takes every
            span the normalisation layer reads as an LLM call. Any other regex is searched in the span
            name and, for spans that are LLM calls, in their Agent Lightning 0.3 name
            (:func:`~agl_core.adapter.genai.compat_span_name`, e.g. ``openai.chat.completion``), so 0.3
            patterns keep finding agl's LLM spans.
        agent_match: regex on agent names (see :func:`~agl_core.adapter.trace_tree.agent_name`); only LLM
            calls whose nearest enclosing agent matches are kept. None keeps every call.
        exclude_llm_call_in_reward: leave out LLM calls made inside a reward span (an LLM judge).
        reward_match: the :class:`RewardMatchPolicy` (or its value).
        max_prompt_length / max_response_length: only used by the report, which flags longer triplets.

    Triplets: ``prompt={"token_ids", "raw_content", "image_urls"}``, ``response={"token_ids",
    "raw_content", "logprobs"?}`` where ``raw_content`` holds OpenAI chat messages, and metadata
    ``request``, ``response``, ``response_id``, ``agent_name``, ``span_id``, ``sequence_id``, ``source``.
    """

    def __init__(
        self,
        repair_hierarchy: bool = True,
        llm_call_match: str = DEFAULT_LLM_CALL_MATCH,
        agent_match: str | None = None,
        exclude_llm_call_in_reward: bool = True,
        reward_match: RewardMatchPolicy | str = RewardMatchPolicy.FIRST_OCCURRENCE,
        _skip_empty_token_spans: bool = False,
        *,
        max_prompt_length: int | None = None,
        max_response_length: int | None = None,
    ) -> None:
        self.repair_hierarchy = repair_hierarchy
        self.llm_call_match = llm_call_match
        self.agent_match = agent_match
        self._llm_re = _genai.llm_call_pattern(llm_call_match)
        self._default_match = llm_call_match == DEFAULT_LLM_CALL_MATCH
        self._agent_re = _genai.llm_call_pattern(agent_match) if agent_match is not None else None
        self.exclude_llm_call_in_reward = exclude_llm_call_in_reward
        try:
            self.reward_match = RewardMatchPolicy(reward_match)
        except ValueError:
            choices = ", ".join(p.value for p in RewardMatchPolicy)
            raise ValueError(f"Unknown reward_match {reward_match!r}; use one of: {choices}") from None
        self.skip_empty_token_spans = _skip_empty_token_spans
        self.max_prompt_length = max_prompt_length
        self.max_response_length = max_response_length

    # ------------------------------------------------------------------ public API

    def adapt(self, source: Sequence[SpanLike]) -> list[Triplet]:
        """The triplets of one rollout's spans (``Span`` or OpenTelemetry ``ReadableSpan``)."""
        return self._run(to_spans(source)).triplets

    def adapt_with_report(self, source: Sequence[SpanLike]) -> tuple[list[Triplet], AdapterReport]:
        """The triplets and the report explaining them (why spans were dropped, rewards unmatched...)."""
        record = self._run(to_spans(source))
        return record.triplets, build_report(record)

    def span_to_triplet(self, span: Span, agent_name: str | None) -> Triplet:
        """Build the triplet of one LLM-call span (override to change the triplet format)."""
        prompt_messages = _genai.prompt_messages(span)
        prompt = {
            "token_ids": _genai.prompt_token_ids(span) or [],
            "raw_content": prompt_messages,
            "image_urls": _genai.image_urls(prompt_messages),
        }
        response: dict[str, Any] = {
            "token_ids": _genai.response_token_ids(span) or [],
            "raw_content": _genai.completion_messages(span),
        }
        logprobs = _genai.logprobs(span)
        if logprobs is not None:
            response["logprobs"] = logprobs
        metadata = {
            "request": _section(span, "gen_ai.request"),
            "response": _section(span, "gen_ai.response"),
            "response_id": _genai.response_id(span),
            "agent_name": agent_name,
            "span_id": span.span_id,
            "sequence_id": span.sequence_id,
            "source": span.attributes.get(
                _genai.LLM_SOURCE, "proxy" if _genai.is_proxy_llm_span(span) else "tracer"
            ),
        }
        return Triplet(prompt=prompt, response=response, reward=None, metadata=metadata)

    def is_llm_call(self, span: Span) -> bool:
        """Whether ``span`` is an LLM call under this adapter's ``llm_call_match`` (see the class doc)."""
        if self._default_match:
            return _genai.is_llm_span(span)
        if self._llm_re.search(span.name) is not None:
            return True
        return _genai.is_llm_span(span) and self._llm_re.search(_genai.compat_span_name(span)) is not None

    def visualize(self, source: Sequence[SpanLike]) -> str:
        """The (repaired) trace tree as indented text, to see why a call was or was not selected."""
        tree = TraceTree.from_spans(to_spans(source))
        if self.repair_hierarchy:
            tree.repair_hierarchy()
        return tree.format()

    # ------------------------------------------------------------------ pipeline

    def _settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = {"agent_match": self.agent_match, "reward_match": self.reward_match.value}
        if self.llm_call_match != DEFAULT_LLM_CALL_MATCH:
            settings["llm_call_match"] = self.llm_call_match
        return settings

    def _run(self, spans: list[Span]) -> AdaptRecord:
        record = AdaptRecord(
            adapter=type(self).__name__,
            spans=spans,
            triplets=[],
            llm_spans=[],
            rewards=[],
            settings=self._settings(),
            max_prompt_length=self.max_prompt_length,
            max_response_length=self.max_response_length,
            llm_call_match=self.llm_call_match,
        )
        if not spans:
            return record
        tree = TraceTree.from_spans(spans)
        if self.repair_hierarchy:
            tree.repair_hierarchy()
        calls = self._select(tree, record)
        for call in calls:
            call.triplet = self.span_to_triplet(call.node.span, call.agent)
        if self.skip_empty_token_spans:
            kept = []
            for call in calls:
                assert call.triplet is not None
                if call.triplet.prompt["token_ids"] and call.triplet.response["token_ids"]:
                    kept.append(call)
                else:
                    record.dropped.append(DroppedCall(call.node.span, "no_token_ids", agent_name=call.agent))
            calls = kept
        self._match_rewards(tree, calls, record)
        record.triplets = [
            call.triplet.model_copy(update={"reward": call.reward})
            for call in calls
            if call.triplet is not None
        ]
        return record

    def _select(self, tree: TraceTree, record: AdaptRecord) -> list[_Call]:
        """Walk the tree and pick LLM calls; every candidate left out is recorded with its reason."""
        calls: list[_Call] = []
        seen_ids: dict[str, str] = {}
        agents: dict[str, None] = {}
        # (node, agent, agent selected?, inside a reward span?, the selected LLM call it is inside)
        stack: list[tuple[TraceNode, str | None, bool, bool, _Call | None]] = [
            (tree.root, None, self._agent_re is None, False, None)
        ]
        while stack:
            node, agent, selected, in_reward, in_llm = stack.pop()
            span = node.span
            name = None if node.virtual else agent_name(span)
            if name is not None:
                agents.setdefault(name, None)
                agent = name
                selected = self._agent_re is None or self._agent_re.search(name) is not None
            is_llm = not node.virtual and self.is_llm_call(span)
            enclosing = in_llm
            if is_llm:
                assert record.llm_spans is not None
                record.llm_spans.append(span)
                key = _genai.response_id(span)
                if not selected:
                    where = f"agent {agent!r}" if agent is not None else "no agent"
                    record.dropped.append(DroppedCall(span, "agent_mismatch", f"under {where}", agent))
                elif in_reward and self.exclude_llm_call_in_reward:
                    record.dropped.append(DroppedCall(span, "in_reward", agent_name=agent))
                elif key is not None and key in seen_ids:
                    record.dropped.append(
                        DroppedCall(span, "duplicate", f"same as span {seen_ids[key]}", agent)
                    )
                elif (
                    in_llm is not None
                    and _same_call(in_llm, key)
                    and _richness(span) <= _richness(in_llm.node.span)
                ):
                    # the same call recorded twice, one span inside the other: keep the richer record
                    record.dropped.append(
                        DroppedCall(span, "nested", f"inside span {in_llm.node.span.span_id}", agent)
                    )
                else:
                    if key is not None:
                        seen_ids[key] = span.span_id
                    call = _Call(node, agent)
                    if in_llm is not None and _same_call(in_llm, key) and in_llm in calls:  # a richer record
                        calls.remove(in_llm)
                        record.dropped.append(
                            DroppedCall(
                                in_llm.node.span, "nested", f"wraps span {span.span_id}", in_llm.agent
                            )
                        )
                    calls.append(call)
                    enclosing = call
            child_in_reward = in_reward or (not node.virtual and _is_reward_scope(span))
            for child in reversed(node.children):
                stack.append((child, agent, selected, child_in_reward, enclosing))
        record.agent_names = list(agents)
        return calls

    def _match_rewards(self, tree: TraceTree, calls: list[_Call], record: AdaptRecord) -> None:
        """Give each reward span to one call per the policy; record every reward's outcome."""
        by_id = {call.node.id: call for call in calls}
        dropped_ends = [
            (d.span.end_time, d.agent_name)
            for d in record.dropped
            if d.reason == "agent_mismatch" and d.span.end_time
        ]
        if self.reward_match is RewardMatchPolicy.FIRST_OCCURRENCE:
            groups = [list(tree.traverse())]
        else:  # each span's children on their own (the root alone, so a reward root is still reported)
            groups = [[tree.root]] + [node.children for node in tree.traverse() if node.children]
        outcomes: dict[str, RewardOutcome] = {}
        for group in groups:
            seen: list[_Call] = []
            for node in sorted(group, key=lambda n: (n.start is None, n.start or 0.0, n.span.sequence_id)):
                call = by_id.get(node.id)
                if call is not None:
                    seen.append(call)
                value = None if node.virtual else get_reward_value(node.span)
                if value is None:
                    continue
                outcome = RewardOutcome(node.span, value)
                outcomes[node.id] = outcome
                if node.start is None:
                    outcome.reason, outcome.detail = "no_start_time", "the reward span has no start time"
                    continue
                target = next(
                    (
                        c
                        for c in reversed(seen)
                        if c.node.end is not None and c.node.end <= node.start and c.reward is None
                    ),
                    None,
                )
                if target is not None:
                    target.reward, outcome.assigned_to = value, target.node.id
                    continue
                ended = [c for c in seen if c.node.end is not None and c.node.end <= node.start]
                excluded = sorted({a or "no agent" for end, a in dropped_ends if end <= node.start})
                if ended:
                    outcome.reason = "all_rewarded"
                    outcome.detail = (
                        "every LLM call before it already has a reward (each call takes at most one)"
                    )
                elif excluded:
                    outcome.reason = "excluded_agent"
                    outcome.detail = (
                        "the only LLM calls before it belong to agents that "
                        f"agent_match={self.agent_match!r} leaves out ({', '.join(excluded)})"
                    )
                elif not calls:
                    outcome.reason, outcome.detail = "no_llm_call", "no LLM call was selected in this rollout"
                elif self.reward_match is RewardMatchPolicy.FIRST_SIBLING:
                    outcome.reason = "no_sibling"
                    outcome.detail = (
                        "no LLM call among its sibling spans ended before it (policy first_sibling)"
                    )
                else:
                    outcome.reason = "before_first_call"
                    outcome.detail = "it was emitted before the first LLM call ended"
        assert record.rewards is not None
        record.rewards.extend(
            sorted(outcomes.values(), key=lambda o: (o.span.start_time or 0.0, o.span.sequence_id))
        )


def _is_reward_scope(span: Span) -> bool:
    """A reward span, or an ``agentlightning.operation`` named ``agentlightning.reward`` (reward function)."""
    if is_reward_span(span):
        return True
    name = span.attributes.get(LightningSpanAttributes.OPERATION_NAME.value)
    return span.name == AGL_OPERATION and name == AGL_REWARD


def _same_call(outer: _Call, key: str | None) -> bool:
    """Whether an LLM span inside ``outer`` records the same call (no two different response ids)."""
    outer_key = _genai.response_id(outer.node.span)
    return key is None or outer_key is None or key == outer_key


def _richness(span: Span) -> tuple[bool, bool, bool]:
    """How much of an LLM call a span recorded: token ids, then response id, then the completion."""
    attributes = span.attributes
    has_ids = _genai.response_token_ids(span) is not None
    has_id = _genai.response_id(span) is not None
    has_completion = any(
        key in attributes or any(k.startswith(key + ".") for k in attributes)
        for key in ("gen_ai.output.messages", "gen_ai.completion", "llm.output_messages")
    )
    return has_ids, has_id, has_completion


def _section(span: Span, prefix: str) -> dict[str, Any]:
    """``prefix.*`` attributes as a nested dict (empty when none)."""
    if not any(key.startswith(prefix + ".") for key in span.attributes):
        return {}
    value = filter_and_unflatten_attributes(dict(span.attributes), prefix)
    return value if isinstance(value, dict) else {"value": value}


# 0.3 defined LlmProxyTraceToTriplet here; agl keeps it in proxy_triplet.py (the table in agl_core._moved03).
def __getattr__(name: str) -> Any:
    from agl_core._moved03 import moved_name

    return moved_name(__name__, name)


class Transition(BaseModel):
    """One step of a token-level trajectory (Agent Lightning 0.3's model; agl's adapters produce `Triplet`).

    ``state`` is the prompt's token ids, ``action`` the response's; ``response_id`` identifies the LLM
    response (for de-duplication), ``agent_name`` the agent, ``reward`` the step's reward if known.
    """

    state: list[int]
    action: list[int]
    response_id: str | None
    agent_name: str
    reward: float | None
