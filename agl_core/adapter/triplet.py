"""``TracerTraceToTriplet``: one rollout's tracer spans → (prompt, response, reward) triplets.

Pipeline: build the :class:`~agl_core.adapter.trace_tree.TraceTree` (optionally repairing the
hierarchy), find LLM-call spans (``llm_call_match``), group the records of each model call into one
(:func:`~agl_core.adapter.call_records.group_llm_calls`: the richest record is read), keep the calls of
selected agents (``agent_match``) not inside reward spans, turn each into a
:class:`~agl_core.types.Triplet`, then give each reward span to an LLM call according to a
:class:`RewardMatchPolicy`. :meth:`TracerTraceToTriplet.adapt_with_report` also
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
from agl_core.adapter.call_records import CallRecords, group_llm_calls, richness
from agl_core.adapter.diagnostics import (
    AdapterReport,
    AdaptRecord,
    DroppedCall,
    DropReason,
    RewardOutcome,
    build_report,
)
from agl_core.adapter.trace_tree import TraceNode, TraceTree, agent_name
from agl_core.emitter import get_reward_value, is_reward_span
from agl_core.semconv import (
    AGL_LLM_REFUSED,
    AGL_LLM_SIDE_CALL,
    AGL_OPERATION,
    AGL_REWARD,
    LightningSpanAttributes,
)
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
    records: CallRecords
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
        kept = []
        for call in calls:  # the LLM proxy's refusals and marked harness side calls are no training samples
            attributes = call.node.span.attributes
            if attributes.get(AGL_LLM_REFUSED) or attributes.get(AGL_LLM_SIDE_CALL) is not None:
                reason: DropReason = "refused" if attributes.get(AGL_LLM_REFUSED) else "side_call"
                record.dropped.append(DroppedCall(call.node.span, reason, agent_name=call.agent))
            else:
                kept.append(call)
        calls = kept
        for call in calls:
            call.triplet = self.span_to_triplet(call.records.best, call.agent)
            if len(call.records.spans) > 1:
                call.triplet = _fill_messages(call.triplet, call.records)
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
        """Walk the tree, group the records of each call, pick calls; every record left out says why."""
        agents: dict[str, None] = {}
        found: list[
            tuple[TraceNode, str | None, bool, bool]
        ] = []  # (node, agent, agent selected?, in reward?)
        enclosing: dict[str, str] = {}  # LLM span id -> the LLM span it is nested in
        # (node, agent, agent selected?, inside a reward span?, the LLM span it is inside)
        stack: list[tuple[TraceNode, str | None, bool, bool, str | None]] = [
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
            if not node.virtual and self.is_llm_call(span):
                found.append((node, agent, selected, in_reward))
                if in_llm is not None:
                    enclosing[span.span_id] = in_llm
                in_llm = span.span_id
            child_in_reward = in_reward or (not node.virtual and _is_reward_scope(span))
            for child in reversed(node.children):
                stack.append((child, agent, selected, child_in_reward, in_llm))
        record.agent_names = list(agents)
        assert record.llm_spans is not None
        record.llm_spans.extend(node.span for node, *_ in found)
        by_span = {
            node.span.span_id: (node, agent, selected, in_reward)
            for node, agent, selected, in_reward in found
        }
        groups = group_llm_calls([node.span for node, *_ in found], enclosing)
        record.llm_calls = len(groups)
        calls: list[_Call] = []
        for group in groups:
            if len(group.spans) == 1:  # the common case: one record of the call
                node, agent, selected, in_reward = by_span[group.best.span_id]
            else:
                infos = [by_span[span.span_id] for span in group.spans]
                # the agent's clock and place in the tree come from a tracer record when there is one
                node = next((i for i in infos if not _genai.is_proxy_llm_span(i[0].span)), infos[0])[0]
                agent = next((i[1] for i in infos if i[1] is not None), None)
                selected = any(i[2] for i in infos if i[1] == agent)
                in_reward = any(i[3] for i in infos)
                for extra in group.extra:
                    record.dropped.append(_repeat(extra, group, by_span[extra.span_id][1]))
            if not selected:
                where = f"agent {agent!r}" if agent is not None else "no agent"
                record.dropped.append(DroppedCall(group.best, "agent_mismatch", f"under {where}", agent))
            elif in_reward and self.exclude_llm_call_in_reward:
                record.dropped.append(DroppedCall(group.best, "in_reward", agent_name=agent))
            else:
                calls.append(_Call(node, agent, records=group))
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


def _repeat(span: Span, group: CallRecords, agent: str | None) -> DroppedCall:
    """Why a record other than the one read was left out: the other path's copy (``merged``), or a second
    record of the same path (``duplicate`` by response id, else ``nested``)."""
    best = group.best
    kept = f"same call as span {best.span_id}, which was kept"
    same_path = [s for s in group.spans if _genai.is_proxy_llm_span(s) == _genai.is_proxy_llm_span(span)]
    if len(same_path) == 1 or (span is max(same_path, key=richness) and best not in same_path):
        return DroppedCall(span, "merged", kept, agent, same_as=best.span_id)
    rid = _genai.response_id(span)
    reason: DropReason = (
        "duplicate"
        if rid is not None and rid in {_genai.response_id(s) for s in same_path if s is not span}
        else "nested"
    )
    return DroppedCall(span, reason, kept, agent, same_as=best.span_id)


def _fill_messages(triplet: Triplet, records: CallRecords) -> Triplet:
    """Prompt or completion messages the record read lacks, taken from another record of the call."""
    prompt, response = triplet.prompt, triplet.response
    if prompt.get("raw_content") is None:
        found = next((m for s in records.extra if (m := _genai.prompt_messages(s)) is not None), None)
        if found is not None:
            prompt = {**prompt, "raw_content": found, "image_urls": _genai.image_urls(found)}
    if response.get("raw_content") is None:
        found = next((m for s in records.extra if (m := _genai.completion_messages(s)) is not None), None)
        if found is not None:
            response = {**response, "raw_content": found}
    if prompt is triplet.prompt and response is triplet.response:
        return triplet
    return triplet.model_copy(update={"prompt": prompt, "response": response})


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
