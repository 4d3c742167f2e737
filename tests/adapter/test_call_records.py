"""One model call = one record, whoever recorded it (issue 35): triplets, samples and doctor agree."""

from __future__ import annotations

import json

import pytest

from agl_core.adapter import TracerTraceToTriplet, TraceToMessages
from agl_core.adapter.base import TraceToTripletBase
from agl_core.adapter.genai import normalize_role, prompt_messages
from agl_core.adapter.proxy_triplet import LlmProxyTraceToTriplet
from agl_core.types import Triplet

from .traces import TraceBuilder, user


def framework_attributes(b: TraceBuilder, text: str, reply: str, **kw: object) -> dict[str, object]:
    """A framework's own GenAI span of a call (pydantic-ai, Semantic Kernel): content, no token ids."""
    return b.llm_attributes([user(text)], reply, prompt_ids=None, response_ids=None, **kw)  # type: ignore[arg-type]


def test_a_framework_span_around_agls_span_with_the_same_response_id_keeps_the_token_ids() -> None:
    """pydantic-ai's instrument_all(): its span and agl's carry one response id; agl's has the token ids."""
    b = TraceBuilder()
    with b.agent("solver", 0, 100):
        for i, start in enumerate((1, 30)):
            outer = framework_attributes(b, f"q{i}", f"a{i}", response_id=f"r{i}")
            with b.span("chat gpt", start, start + 20, **outer):
                b.llm(start + 1, start + 19, [user(f"q{i}")], f"a{i}", response_id=f"r{i}")
    b.reward(90, 1.0)
    triplets, report = TracerTraceToTriplet().adapt_with_report(b.spans())
    assert [t.response["token_ids"] for t in triplets] == [[4, 5], [4, 5]]
    assert [t.prompt["token_ids"] for t in triplets] == [[1, 2, 3], [1, 2, 3]]
    assert report.ok and report.llm_span_count == 2
    assert "missing_token_ids" not in report.codes()
    assert [s["messages"][-1]["content"] for s in TraceToMessages().adapt(b.spans())] == ["a0", "a1"]


def test_tracer_and_proxy_records_of_each_call_count_once_and_the_proxy_record_is_read() -> None:
    """`make demo` with proxy and tracer on: two real calls are two LLM calls, no duplicate warning."""
    b = TraceBuilder()
    with b.agent("solver", 0, 100):
        for i, start in enumerate((1, 30)):
            b.llm(start, start + 20, [user(f"q{i}")], f"a{i}", response_id=f"r{i}", prompt_ids=None)
            proxy = b.llm_attributes(
                [user(f"q{i}")], f"a{i}", response_id=f"r{i}", prompt_ids=(7, 8), source="proxy"
            )
            b.root_span("agl.llm_proxy.request", start + 2, start + 18, **proxy)
        b.reward(90, 1.0)
    spans = b.spans()
    triplets, report = TracerTraceToTriplet().adapt_with_report(spans)
    assert [(t.metadata["source"], t.prompt["token_ids"]) for t in triplets] == [("proxy", [7, 8])] * 2
    assert [t.metadata["agent_name"] for t in triplets] == ["solver", "solver"]
    assert report.llm_span_count == 2 and report.ok
    assert report.codes() == []
    assert len(TraceToMessages().adapt(spans)) == 2
    # what the dashboard folds: each record names the record read for its call, one per call
    read = [t.metadata["span_id"] for t in triplets]
    llm = [
        s for s in spans if s.name != "agentlightning.annotation" and s.attributes.get("gen_ai.response.id")
    ]
    assert sorted(report.llm_records) == sorted(s.span_id for s in llm)
    assert sorted(set(report.llm_records.values())) == sorted(read)


def test_a_framework_span_without_response_id_pairs_with_the_proxy_record_by_completion() -> None:
    """DSPy / Google ADK on the proxy path: the framework's span has no response id and is not nested."""
    b = TraceBuilder()
    with b.agent("solver", 0, 100):
        for i, start in enumerate((1, 30, 60)):
            attrs = framework_attributes(b, f"q{i}", f"a{i}")
            del attrs["gen_ai.response.id"]
            with b.span("generate_content gpt", start, start + 20, **attrs):
                pass
            proxy = b.llm_attributes([user(f"q{i}")], f"a{i}", response_id=f"p{i}", source="proxy")
            b.root_span("agl.llm_proxy.request", start + 2, start + 18, **proxy)
    spans = b.spans()
    samples = TraceToMessages().adapt(spans)
    assert [s["messages"][-1]["content"] for s in samples] == ["a0", "a1", "a2"]
    triplets = TracerTraceToTriplet().adapt(spans)
    assert [t.metadata["response_id"] for t in triplets] == ["p0", "p1", "p2"]
    proxy_triplets = LlmProxyTraceToTriplet(agent_match="solver").adapt(spans)
    assert [t.metadata["agent_name"] for t in proxy_triplets] == ["solver"] * 3


def test_an_agent_span_never_becomes_a_sample() -> None:
    """Semantic Kernel's invoke_agent span carries the conversation but is not a model call."""
    b = TraceBuilder()
    agent_attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "helper",
        "gen_ai.input.messages": "[]",  # what it was asked is in the model call below
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "hello"}], "finish_reason": "stop"}]
        ),
    }
    with b.span("invoke_agent helper", 0, 100, **agent_attrs):
        b.llm(1, 20, [user("hi")], "hello")
    samples = TraceToMessages().adapt(b.spans())
    assert [s["messages"] for s in samples] == [
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    ]


def test_enum_reprs_and_framework_role_names_are_read_as_chat_roles() -> None:
    """smolagents sends MessageRole members; str() of one is 'MessageRole.SYSTEM'."""
    b = TraceBuilder()
    messages = [
        {"role": "MessageRole.SYSTEM", "content": "be brief"},
        {"role": "MessageRole.USER", "content": "hi"},
    ]
    attrs = b.llm_attributes(messages, "hello")
    with b.span("chat qwen", 0, 1, **attrs):
        pass
    (span,) = b.spans()
    assert [m["role"] for m in prompt_messages(span) or []] == ["system", "user"]
    (sample,) = TraceToMessages().adapt([span])
    assert [m["role"] for m in sample["messages"]] == ["system", "user", "assistant"]
    assert [normalize_role(r) for r in ("Human", "model", "tool-response", None)] == [
        "user",
        "assistant",
        "tool",
        "user",
    ]


class _Fixed(TraceToTripletBase):
    """An adapter returning the triplets it was given (a plugin's output, as doctor sees it)."""

    def __init__(self, triplets: list[Triplet]) -> None:
        self.triplets = triplets

    def adapt(self, source: object) -> list[Triplet]:
        return self.triplets


def _triplet(
    messages: list[dict[str, object]] | None, rid: str, prompt_ids: list[int] | None = None
) -> Triplet:
    return Triplet(
        prompt={"token_ids": prompt_ids or [], "raw_content": messages},
        response={"token_ids": [1], "raw_content": [{"role": "assistant", "content": "ok"}]},
        reward=1.0,
        metadata={"response_id": rid, "span_id": rid},
    )


def test_doctor_refuses_ok_for_an_invalid_role_an_empty_prompt_or_a_duplicate() -> None:
    b = TraceBuilder()
    b.reward(1, 1.0)
    spans = b.spans()
    good = _triplet([{"role": "user", "content": "hi"}], "r0", [1])
    assert _Fixed([good]).diagnose(spans).ok
    bad_role = _Fixed([_triplet([{"role": "narrator", "content": "hi"}], "r1", [1])]).diagnose(spans)
    assert not bad_role.ok and "invalid_roles" in bad_role.codes()
    assert "'narrator'" in (bad_role.get("invalid_roles") or bad_role.problems[0]).message
    empty = _Fixed([good, _triplet(None, "r2")]).diagnose(spans)
    assert not empty.ok and "empty_prompt" in empty.codes()
    twice = _Fixed([good, _triplet([{"role": "user", "content": "hi"}], "r0", [1])]).diagnose(spans)
    assert not twice.ok and "duplicate_samples" in twice.codes()


def test_doctor_names_otel_sdk_disabled_when_no_llm_call_was_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CrewAI's telemetry opt-out switches every OpenTelemetry provider the application builds off."""
    b = TraceBuilder()
    b.reward(1, 1.0)
    spans = b.spans()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    problem = TracerTraceToTriplet().diagnose(spans).get("no_llm_spans")
    assert problem is not None and "OTEL_SDK_DISABLED=true" in problem.message


def openinference_attributes(text: str, reply: str) -> dict[str, object]:
    """What OpenInference's LlamaIndex instrumentor writes on the span of a streamed call (no response id)."""
    return {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt",
        "input.value": json.dumps({"messages": [text]}),
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": text,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": reply,
    }


def test_a_framework_span_beside_agls_span_is_the_same_call_and_helper_llm_spans_are_no_calls() -> None:
    """LlamaIndex with OpenInference: per step a `_prepare_chat_with_tools` span of kind LLM (no call),
    an `astream_chat` span around the one with the messages, and agl's span beside them (not inside)."""
    b = TraceBuilder()
    with b.agent("solver", 0, 100):
        for i, start in enumerate((1, 40)):
            with b.span("run_agent_step", start, start + 30):
                generic = {"openinference.span.kind": "LLM", "llm.model_name": "gpt", "input.value": "{}"}
                with b.span("OpenAILike._prepare_chat_with_tools", start, start + 1, **generic):
                    pass
                with (
                    b.span("OpenAILike.astream_chat", start + 1, start + 2, **generic),
                    b.span(
                        "OpenAILike.astream_chat",
                        start + 1,
                        start + 2,
                        **openinference_attributes(f"q{i}", f"a{i}"),
                    ),
                ):
                    pass
                b.llm(start + 3, start + 20, [user(f"q{i}")], f"a{i}", response_id=f"r{i}")
    b.reward(90, 1.0)
    spans = b.spans()
    triplets, report = TracerTraceToTriplet().adapt_with_report(spans)
    assert [t.response["token_ids"] for t in triplets] == [[4, 5], [4, 5]], report.format()
    assert report.llm_span_count == 2 and report.ok, report.format()
    assert "empty_prompt" not in report.codes() and "missing_token_ids" not in report.codes()
    assert [s["messages"][-1]["content"] for s in TraceToMessages().adapt(spans)] == ["a0", "a1"]
