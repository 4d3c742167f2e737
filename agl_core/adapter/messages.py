"""``TraceToMessages``: LLM-call spans → chat samples in the OpenAI fine-tuning format (for SFT, APO)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypedDict

from agl_core.adapter import genai as _genai
from agl_core.adapter.base import TraceAdapter, to_spans
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
    reads (:mod:`agl_core.adapter.genai`: OpenInference, OpenLLMetry, span events). A call recorded twice
    appears once: by response id (the tracer and the LLM proxy), or as the same sample from a span nested
    in another (a framework's LLM span around agl's). Spans without recorded prompt and output messages
    are skipped. Each choice of a call with several becomes its own sample. Tool calls without a recorded
    assistant tool call are taken from child spans' ``tool.*`` attributes. A malformed attribute raises
    ``ValueError`` naming the span.
    """

    def adapt(self, source: Sequence[SpanLike]) -> list[OpenAIMessages]:
        """Samples in call order (start time, then sequence id)."""
        spans = to_spans(source)
        children: dict[str, list[Span]] = {}
        parents: dict[str, str] = {}
        for span in spans:
            if span.parent_id:
                children.setdefault(span.parent_id, []).append(span)
                parents[span.span_id] = span.parent_id
        producers: dict[str, list[OpenAIMessages]] = {}  # span id -> the samples it gave
        seen: set[str] = set()
        samples: list[OpenAIMessages] = []
        for span in sorted(spans, key=lambda s: (s.start_time is None, s.start_time or 0.0, s.sequence_id)):
            prompt = _genai.prompt_messages(span, strict=True)
            if prompt is None:
                continue
            rid = _genai.response_id(span)
            if rid is not None:
                if rid in seen:
                    continue
                seen.add(rid)
            tools = _genai.request_tools(span, strict=True)
            for choice in _genai.completion_messages(span, strict=True) or []:
                reply = {"role": "assistant", **{k: v for k, v in choice.items() if k != "role"}}
                if not reply.get("tool_calls"):
                    legacy = _legacy_tool_calls(children.get(span.span_id, []))
                    if legacy:
                        reply["tool_calls"] = legacy
                sample: OpenAIMessages = {
                    "messages": [dict(m) for m in prompt] + [reply],
                    "tools": tools or None,
                }
                outer = producers.keys() & _ancestors(span.span_id, parents) if producers else ()
                if outer and _key(sample) in {_key(s) for o in outer for s in producers[o]}:
                    continue  # the same call, recorded again inside a span that gave this sample
                producers.setdefault(span.span_id, []).append(sample)
                samples.append(sample)
        return samples


def _key(sample: OpenAIMessages) -> str:
    return json.dumps(sample["messages"], sort_keys=True, default=str)


def _ancestors(span_id: str, parents: dict[str, str]) -> set[str]:
    """The ids of the span's ancestors (cycles cut)."""
    found: set[str] = set()
    current = parents.get(span_id)
    while current is not None and current not in found:
        found.add(current)
        current = parents.get(current)
    return found


# 0.3's helpers of this module live in the compatibility module messages_03 (the table in agl_core._moved03).
def __getattr__(name: str) -> Any:
    from agl_core._moved03 import moved_name

    return moved_name(__name__, name)
