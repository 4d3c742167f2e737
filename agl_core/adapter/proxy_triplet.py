"""``LlmProxyTraceToTriplet``: triplets from the calls the LLM proxy recorded, joined with tracer structure.

The proxy records every request with the exact token ids the model server returned, so these triplets
are the reliable ones for RL. Tracer spans (when present) add *which agent* made each call: a proxy call
and a tracer LLM span are the same call by the rules of :mod:`agl_core.adapter.call_records` (the same
``gen_ai.response.id``, else the same completion). Timestamps are never used,
because the proxy and the agent may run on machines with different clocks: order is the store's
per-rollout ``sequence_id``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agl_core.adapter import genai as _genai
from agl_core.adapter.base import TraceToTripletBase, to_spans
from agl_core.adapter.call_records import group_llm_calls, richness
from agl_core.adapter.diagnostics import (
    AdapterReport,
    AdaptRecord,
    DroppedCall,
    Problem,
    RewardOutcome,
    build_report,
)
from agl_core.adapter.trace_tree import TraceTree, agent_name
from agl_core.adapter.triplet import DEFAULT_LLM_CALL_MATCH
from agl_core.emitter import get_reward_value
from agl_core.semconv import AGL_LLM_REFUSED, AGL_LLM_SIDE_CALL
from agl_core.types import Span, SpanLike, Triplet

__all__ = ["LlmProxyTraceToTriplet"]


@dataclass
class _Item:
    span: Span
    prompt_ids: list[int]
    response_ids: list[int]
    tracer_span: Span | None
    agent: str | None
    reward: float | None = None


class LlmProxyTraceToTriplet(TraceToTripletBase):
    """One triplet per proxy-recorded LLM call that has prompt and response token ids.

    Proxy calls are spans named ``agl.llm_proxy.request`` (or with ``agl.llm.source == "proxy"``), and
    Agent Lightning 0.3's ``raw_gen_ai_request`` / ``litellm_request``. Calls repeating a response id
    are skipped. Rewards, in ``sequence_id`` order, each go to the latest call without a reward whose
    sequence id is strictly smaller.

    Args:
        agent_match: keep only calls whose tracer twin lies inside an agent matching this regex (calls
            without a tracer twin are then left out). None keeps every call.
        llm_call_match: how tracer LLM spans are recognised (for the join).
        max_prompt_length / max_response_length: only used by the report.
    """

    def __init__(
        self,
        *,
        agent_match: str | None = None,
        llm_call_match: str = DEFAULT_LLM_CALL_MATCH,
        max_prompt_length: int | None = None,
        max_response_length: int | None = None,
    ) -> None:
        self.agent_match = agent_match
        self.llm_call_match = llm_call_match
        self._agent_re = _genai.llm_call_pattern(agent_match) if agent_match is not None else None
        self._llm_re = _genai.llm_call_pattern(llm_call_match)
        self.max_prompt_length = max_prompt_length
        self.max_response_length = max_response_length

    def adapt(self, source: Sequence[SpanLike]) -> list[Triplet]:
        """The triplets of one rollout's spans."""
        return self._run(to_spans(source)).triplets

    def adapt_with_report(self, source: Sequence[SpanLike]) -> tuple[list[Triplet], AdapterReport]:
        """The triplets and the report explaining them."""
        record = self._run(to_spans(source))
        return record.triplets, build_report(record)

    def _tracer_calls(self, spans: list[Span]) -> tuple[dict[str, tuple[Span, str | None]], list[str], int]:
        """Proxy span id -> its tracer twin (another record of the same call, see
        :func:`~agl_core.adapter.call_records.group_llm_calls`) with the twin's nearest enclosing agent;
        all agent names; and how many LLM spans the tracer recorded."""
        tracer = [s for s in spans if not _genai.is_proxy_llm_span(s)]
        if not tracer:
            return {}, [], 0
        llm: list[tuple[Span, str | None]] = []
        agents: dict[str, None] = {}
        enclosing: dict[str, str] = {}
        stack: list[tuple[Any, str | None, str | None]] = [(TraceTree.from_spans(tracer).root, None, None)]
        while stack:
            node, agent, in_llm = stack.pop()
            name = None if node.virtual else agent_name(node.span)
            if name is not None:
                agent = name
                agents.setdefault(name, None)
            if not node.virtual and self._is_tracer_llm_call(node.span):
                llm.append((node.span, agent))
                if in_llm is not None:
                    enclosing[node.span.span_id] = in_llm
                in_llm = node.span.span_id
            stack.extend((child, agent, in_llm) for child in reversed(node.children))
        agent_of = {span.span_id: agent for span, agent in llm}
        proxy = [s for s in spans if _genai.is_proxy_llm_span(s)]
        twins: dict[str, tuple[Span, str | None]] = {}
        for call in group_llm_calls([span for span, _ in llm] + proxy, enclosing):
            ours = [s for s in call.spans if s.span_id in agent_of and not _genai.is_proxy_llm_span(s)]
            if not ours:
                continue
            twin = max(ours, key=richness)
            agent = next((agent_of[s.span_id] for s in ours if agent_of[s.span_id] is not None), None)
            for span in call.spans:
                if _genai.is_proxy_llm_span(span):
                    twins[span.span_id] = (twin, agent)
        return twins, list(agents), len(llm)

    def _is_tracer_llm_call(self, span: Span) -> bool:
        """LLM calls by attributes with the default ``llm_call_match``, else by name or 0.3 name alias."""
        if self.llm_call_match == DEFAULT_LLM_CALL_MATCH:
            return _genai.is_llm_span(span)
        if self._llm_re.search(span.name):
            return True
        return _genai.is_llm_span(span) and self._llm_re.search(_genai.compat_span_name(span)) is not None

    def _run(self, spans: list[Span]) -> AdaptRecord:
        ordered = [span for _, span in sorted(enumerate(spans), key=lambda p: (p[1].sequence_id, p[0]))]
        tracer, agents, tracer_llm_count = self._tracer_calls(ordered)
        record = AdaptRecord(
            adapter=type(self).__name__,
            spans=spans,
            triplets=[],
            llm_spans=[],
            rewards=[],
            agent_names=agents,
            settings={"agent_match": self.agent_match},
            max_prompt_length=self.max_prompt_length,
            max_response_length=self.max_response_length,
        )
        assert record.llm_spans is not None and record.rewards is not None
        items: list[_Item] = []
        seen: dict[str, str] = {}
        for span in ordered:
            if _genai.is_proxy_llm_span(span):
                record.llm_spans.append(span)
                item = self._item(span, tracer, seen, record)
                if item is not None:
                    items.append(item)
                continue
            value = get_reward_value(span)
            if value is None:
                continue
            outcome = RewardOutcome(span, value)
            record.rewards.append(outcome)
            earlier = [i for i in items if i.span.sequence_id < span.sequence_id]
            target = next((i for i in reversed(earlier) if i.reward is None), None)
            if target is not None:
                target.reward, outcome.assigned_to = value, target.span.span_id
            elif earlier:
                outcome.reason = "all_rewarded"
                outcome.detail = (
                    "every proxy call before it already has a reward (each call takes at most one)"
                )
            else:
                outcome.reason = "no_earlier_call" if items or record.llm_spans else "no_llm_call"
                outcome.detail = (
                    f"no usable proxy call has a sequence id smaller than its own ({span.sequence_id})"
                    if outcome.reason == "no_earlier_call"
                    else "no proxy-recorded LLM call was found in this rollout"
                )
        record.triplets = [self._triplet(item) for item in items]
        if not record.llm_spans and tracer_llm_count:
            record.extra_problems.append(
                Problem(
                    code="no_proxy_spans",
                    severity="error",
                    message="No call recorded by the LLM proxy in this rollout, but the tracer recorded "
                    f"{tracer_llm_count} LLM calls.",
                    fix="Point the agent's base_url at the LLM proxy resource (ProxyLLM), or use the "
                    "'triplet' adapter.",
                )
            )
        return record

    def _item(
        self,
        span: Span,
        tracer: dict[str, tuple[Span, str | None]],
        seen: dict[str, str],
        record: AdaptRecord,
    ) -> _Item | None:
        """The usable call of one proxy span, or None after recording why it was dropped."""
        if span.attributes.get(AGL_LLM_REFUSED):  # reported as proxy_refused
            record.dropped.append(DroppedCall(span, "refused"))
            return None
        if span.attributes.get(AGL_LLM_SIDE_CALL) is not None:
            record.dropped.append(DroppedCall(span, "side_call", str(span.attributes[AGL_LLM_SIDE_CALL])))
            return None
        rid = _genai.response_id(span)
        if rid is not None and rid in seen:
            record.dropped.append(
                DroppedCall(span, "duplicate", f"same as span {seen[rid]}", same_as=seen[rid])
            )
            return None
        twin_span, agent = tracer.get(span.span_id, (None, None))
        if agent is None:
            agent = agent_name(span)
        prompt_ids, response_ids = _genai.prompt_token_ids(span), _genai.response_token_ids(span)
        if not prompt_ids or not response_ids:
            record.dropped.append(DroppedCall(span, "no_token_ids", agent_name=agent))
            return None
        if self._agent_re is not None:
            if twin_span is None and agent is None:
                record.dropped.append(DroppedCall(span, "not_joined"))
                return None
            if agent is None or self._agent_re.search(agent) is None:
                record.dropped.append(DroppedCall(span, "agent_mismatch", f"under agent {agent!r}", agent))
                return None
        if rid is not None:
            seen[rid] = span.span_id
        return _Item(span, prompt_ids, response_ids, twin_span, agent)

    def _triplet(self, item: _Item) -> Triplet:
        span, twin = item.span, item.tracer_span
        prompt_messages = _genai.prompt_messages(span)
        if prompt_messages is None and twin is not None:
            prompt_messages = _genai.prompt_messages(twin)
        completion = _genai.completion_messages(span)
        if completion is None and twin is not None:
            completion = _genai.completion_messages(twin)
        response: dict[str, Any] = {"token_ids": item.response_ids, "raw_content": completion}
        logprobs = _genai.logprobs(span)
        if logprobs is None and twin is not None:
            logprobs = _genai.logprobs(twin)
        if logprobs is not None:
            response["logprobs"] = logprobs
        return Triplet(
            prompt={
                "token_ids": item.prompt_ids,
                "raw_content": prompt_messages,
                "image_urls": _genai.image_urls(prompt_messages),
            },
            response=response,
            reward=item.reward,
            metadata={
                "response_id": _genai.response_id(span),
                "agent_name": item.agent,
                "span_id": span.span_id,
                "sequence_id": span.sequence_id,
                "tracer_span_id": twin.span_id if twin is not None else None,
                "source": "proxy",
            },
        )
