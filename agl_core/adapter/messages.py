"""``TraceToMessages``: LLM-call spans → chat samples in the OpenAI fine-tuning format (for SFT, APO)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypedDict

from agl_core.adapter import genai as _genai
from agl_core.adapter.base import TraceAdapter, to_spans
from agl_core.adapter.call_records import group_llm_calls, nearest_llm_ancestors
from agl_core.types import Span, SpanLike

__all__ = ["OpenAIMessages", "TraceToMessages"]


class OpenAIMessages(TypedDict):
    """One sample: the chat ``messages`` (prompt + the assistant reply) and the ``tools`` offered, or None."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None


def _legacy_tool_calls(children: Sequence[Span]) -> list[dict[str, Any]]:
    """Tool calls recorded as child spans with ``tool.*`` attributes (AgentOps, Agent Lightning 0.3)."""
    calls: list[dict[str, Any]] = []
    for child in children:
        attrs = child.attributes
        if not isinstance(attrs.get("tool.name"), str):
            continue
        arguments = attrs.get("tool.parameters", "{}")
        calls.append(
            {
                "id": attrs.get("tool.call.id"),
                "type": attrs.get("tool.call.type", "function"),
                "function": {
                    "name": attrs["tool.name"],
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
        )
    return calls


class TraceToMessages(TraceAdapter[list[OpenAIMessages]]):
    """One ``{"messages": [...], "tools": [...] | None}`` sample per recorded LLM call and choice.

    Content comes from the GenAI JSON attributes (``gen_ai.input.messages`` / ``gen_ai.output.messages``,
    ``gen_ai.request.tools``) or Agent Lightning 0.3's flattened ``gen_ai.prompt.*`` /
    ``gen_ai.completion.*`` / ``gen_ai.request.functions.*``, and every other shape the normalisation layer
    reads (:mod:`agl_core.adapter.genai`: OpenInference, OpenLLMetry, span events). Only LLM-call spans
    (:func:`~agl_core.adapter.genai.is_llm_span`) give samples -- never an agent span such as
    ``invoke_agent``. A call recorded several times (a framework's span, agl's, the LLM proxy's) gives one
    sample, read from its richest record -- the proxy's exact record when there is one
    (:func:`~agl_core.adapter.call_records.group_llm_calls`). Calls without recorded prompt and output
    messages are skipped. Each choice of a call with several becomes its own sample. Tool calls without a
    recorded assistant tool call are taken from child spans' ``tool.*`` attributes. A malformed attribute
    raises ``ValueError`` naming the span.
    """

    def adapt(self, source: Sequence[SpanLike]) -> list[OpenAIMessages]:
        """Samples in call order (start time of the call's first record, then sequence id)."""
        spans = to_spans(source)
        children: dict[str, list[Span]] = {}
        for span in spans:
            if span.parent_id:
                children.setdefault(span.parent_id, []).append(span)
        llm = sorted(
            (s for s in spans if _genai.is_llm_span(s)),
            key=lambda s: (s.start_time is None, s.start_time or 0.0, s.sequence_id),
        )
        enclosing = nearest_llm_ancestors(spans, {s.span_id for s in llm})
        samples: list[OpenAIMessages] = []
        for call in group_llm_calls(llm, enclosing):
            records = [call.best, *call.extra]
            prompt = next(
                (m for s in records if (m := _genai.prompt_messages(s, strict=True)) is not None), None
            )
            if prompt is None:
                continue
            replied = next(
                ((s, m) for s in records if (m := _genai.completion_messages(s, strict=True)) is not None),
                None,
            )
            if replied is None:
                continue
            _, choices = replied
            tools = next((t for s in records if (t := _genai.request_tools(s, strict=True))), None)
            for choice in choices:
                reply = {"role": "assistant", **{k: v for k, v in choice.items() if k != "role"}}
                if not reply.get("tool_calls"):
                    legacy = [c for s in records for c in _legacy_tool_calls(children.get(s.span_id, []))]
                    if legacy:
                        reply["tool_calls"] = legacy
                samples.append({"messages": [dict(m) for m in prompt] + [reply], "tools": tools or None})
        return samples


# 0.3's helpers of this module live in the compatibility module messages_03 (the table in agl_core._moved03).
def __getattr__(name: str) -> Any:
    from agl_core._moved03 import moved_name

    return moved_name(__name__, name)
