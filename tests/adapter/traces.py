"""Build realistic rollout traces with the real OpenTelemetry SDK, at explicit times.

LLM-call spans carry the attributes agl's tracer and LLM proxy write (OTel GenAI conventions: span
``chat {model}``, ``gen_ai.*``, content as JSON in the GenAI "parts" format, plus ``prompt_token_ids``,
``response_token_ids``, ``logprobs.content``, ``gen_ai.request.tools``, ``agl.llm.source``). Spans get
sequence ids in the order they end, as the store assigns them when the tracer streams finished spans.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agl_core.types import Span

T0 = 1_700_000_000.0


def _ns(t: float) -> int:
    return int((T0 + t) * 1e9)


def genai_parts(message: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat message in the GenAI "parts" format (what the instrumentation records)."""
    parts: list[dict[str, Any]] = []
    content = message.get("content")
    if isinstance(content, str):
        parts.append({"type": "text", "content": content})
    elif isinstance(content, list):
        for part in content:
            if part["type"] == "text":
                parts.append({"type": "text", "content": part["text"]})
            else:
                parts.append({"type": "uri", "modality": "image", "uri": part["image_url"]["url"]})
    for call in message.get("tool_calls") or []:
        fn = call["function"]
        parts.append(
            {
                "type": "tool_call",
                "id": call["id"],
                "name": fn["name"],
                "arguments": json.loads(fn["arguments"]),
            }
        )
    if message["role"] == "tool":
        parts = [{"type": "tool_call_response", "id": message["tool_call_id"], "response": content}]
    return {"role": message["role"], "parts": parts}


class TraceBuilder:
    """Records spans through a real SDK tracer; times are seconds after :data:`T0`."""

    def __init__(self, rollout_id: str = "ro-1", attempt_id: str = "at-1") -> None:
        self.rollout_id, self.attempt_id = rollout_id, attempt_id
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = provider.get_tracer("agl-tests")
        self._ids = 0

    @contextmanager
    def span(self, name: str, start: float, end: float, **attributes: Any) -> Iterator[SdkSpan]:
        """A span around the block, current while it runs (children nest under it)."""
        span = self.tracer.start_span(name, start_time=_ns(start), attributes=attributes or None)
        with trace.use_span(span, end_on_exit=False):
            yield span  # type: ignore[misc]
        span.end(end_time=_ns(end))

    def root_span(self, name: str, start: float, end: float, **attributes: Any) -> None:
        """A span with no parent, whatever is current (a lost parent link)."""
        span = self.tracer.start_span(
            name, context=trace.set_span_in_context(trace.INVALID_SPAN), start_time=_ns(start)
        )
        span.set_attributes(attributes)
        span.end(end_time=_ns(end))

    def agent(self, name: str, start: float, end: float, key: str = "gen_ai.agent.name") -> Any:
        """An agent span (named by ``gen_ai.agent.name`` or another agent key)."""
        return self.span(f"invoke_agent {name}", start, end, **{key: name})

    def llm_attributes(
        self,
        messages: Sequence[dict[str, Any]],
        reply: str | None = "ok",
        *,
        response_id: str | None = None,
        prompt_ids: Sequence[int] | None = (1, 2, 3),
        response_ids: Sequence[int] | None = (4, 5),
        tool_calls: Sequence[dict[str, Any]] = (),
        tools: Sequence[dict[str, Any]] | None = None,
        logprobs: Sequence[dict[str, Any]] | None = None,
        source: str = "tracer",
        model: str = "qwen",
    ) -> dict[str, Any]:
        """The attributes of one LLM-call span."""
        if response_id is None:
            self._ids += 1
            response_id = f"chatcmpl-{self._ids}"
        out_message: dict[str, Any] = {"role": "assistant", "content": reply, "tool_calls": list(tool_calls)}
        output = genai_parts(out_message) | {"finish_reason": "tool_calls" if tool_calls else "stop"}
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.response.model": model,
            "gen_ai.response.id": response_id,
            "gen_ai.response.finish_reasons": [output["finish_reason"]],
            "gen_ai.input.messages": json.dumps([genai_parts(dict(m)) for m in messages]),
            "gen_ai.output.messages": json.dumps([output]),
            "agl.llm.source": source,
        }
        if prompt_ids is not None:
            attrs["prompt_token_ids"] = list(prompt_ids)
            attrs["gen_ai.usage.input_tokens"] = len(prompt_ids)
        if response_ids is not None:
            attrs["response_token_ids"] = list(response_ids)
            attrs["gen_ai.usage.output_tokens"] = len(response_ids)
        if tools is not None:
            attrs["gen_ai.request.tools"] = json.dumps(list(tools))
        if logprobs is not None:
            attrs["logprobs.content"] = json.dumps(list(logprobs))
        return attrs

    def llm(
        self,
        start: float,
        end: float,
        messages: Sequence[dict[str, Any]],
        reply: str | None = "ok",
        **kw: Any,
    ) -> str:
        """A ``chat {model}`` span; returns its response id."""
        attrs = self.llm_attributes(messages, reply, **kw)
        with self.span(f"chat {attrs['gen_ai.request.model']}", start, end, **attrs):
            pass
        return str(attrs["gen_ai.response.id"])

    def reward(self, at: float, value: float, name: str = "primary") -> None:
        """An instantaneous reward annotation, as ``emit_reward`` writes it."""
        attrs = {"agentlightning.reward.0.name": name, "agentlightning.reward.0.value": value}
        with self.span("agentlightning.annotation", at, at, **attrs):
            pass

    def finished(self) -> list[ReadableSpan]:
        """The SDK spans, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def spans(self) -> list[Span]:
        """The stored form: rollout/attempt ids and sequence ids 1, 2, ... in end order."""
        return [
            Span.from_opentelemetry(s, self.rollout_id, self.attempt_id, i + 1)
            for i, s in enumerate(self.finished())
        ]


def user(text: str) -> dict[str, Any]:
    """A user message."""
    return {"role": "user", "content": text}
