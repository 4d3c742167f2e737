"""LlmProxyTraceToTriplet: proxy-recorded calls (exact token ids) joined with tracer structure by id."""

from __future__ import annotations

from typing import Any

import openai

from agl_core.adapter import LlmProxyTraceToTriplet
from agl_core.emitter import emit_reward
from agl_core.llm_proxy import LLMProxy
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer.otel import OtelTracer
from agl_core.types import Span
from agl_testing.fake_openai import FakeOpenAIServer
from tests.adapter.traces import TraceBuilder, user

SKEW = -1000.0  # the proxy's clock is 1000 s behind the agent's: timestamps must not matter


def proxy_span(
    b: TraceBuilder, response_id: str, prompt_ids: list[int] | None, response_ids: list[int] | None
) -> None:
    attrs = b.llm_attributes(
        [user(f"q {response_id}")],
        f"a {response_id}",
        response_id=response_id,
        prompt_ids=prompt_ids,
        response_ids=response_ids,
        source="proxy",
    )
    b.root_span("agl.llm_proxy.request", SKEW, SKEW + 1, **attrs)


def with_sequence(spans: list[Span], order: list[str]) -> list[Span]:
    """Sequence ids by key order: ``<source>:<response id>`` for LLM spans, ``reward:<v>``, else the name."""

    def key(span: Span) -> str:
        if "agentlightning.reward.0.value" in span.attributes:
            return f"reward:{span.attributes['agentlightning.reward.0.value']}"
        rid = span.attributes.get("gen_ai.response.id")
        if rid is not None:
            return f"{span.attributes.get('agl.llm.source')}:{rid}"
        return span.name

    rank = {name: i + 1 for i, name in enumerate(order)}
    out = [s.model_copy(update={"sequence_id": rank[key(s)]}) for s in spans]
    return sorted(out, key=lambda s: -s.sequence_id)  # arrival order must not matter either


def two_agent_rollout(*, with_tracer: bool = True) -> list[Span]:
    b = TraceBuilder()
    if with_tracer:
        with b.span("rollout", 0, 100):
            with b.agent("writer", 1, 40):
                b.llm(2, 10, [user("q p1")], "a p1", response_id="p1", prompt_ids=None, response_ids=None)
            b.reward(45, 0.5)
            with b.agent("reviewer", 41, 60):
                b.llm(42, 50, [user("q p2")], "a p2", response_id="p2", prompt_ids=None, response_ids=None)
            b.reward(99, 1.0)
    else:
        b.reward(45, 0.5)
        b.reward(99, 1.0)
    proxy_span(b, "p1", [1, 2], [3, 4])
    proxy_span(b, "p2", [5, 6, 7], [8])
    order = ["proxy:p1", "tracer:p1", "invoke_agent writer", "reward:0.5", "proxy:p2", "tracer:p2"]
    order += ["invoke_agent reviewer", "reward:1.0", "rollout"]
    if not with_tracer:
        order = [k for k in order if k.startswith(("proxy", "reward"))]
    return with_sequence(b.spans(), order)


def test_proxy_calls_joined_with_tracer_agents_and_rewards_by_sequence() -> None:
    triplets = LlmProxyTraceToTriplet().adapt(two_agent_rollout())
    assert [(t.metadata["response_id"], t.metadata["agent_name"], t.reward) for t in triplets] == [
        ("p1", "writer", 0.5),
        ("p2", "reviewer", 1.0),
    ]
    first = triplets[0]
    assert first.prompt["token_ids"] == [1, 2] and first.response["token_ids"] == [3, 4]
    assert first.prompt["raw_content"] == [user("q p1")]
    assert first.response["raw_content"] == [{"role": "assistant", "content": "a p1"}]
    assert first.metadata["source"] == "proxy" and first.metadata["tracer_span_id"] is not None


def test_agent_match_selects_through_the_tracer_twin() -> None:
    spans = two_agent_rollout()
    reviewer = LlmProxyTraceToTriplet(agent_match="review").adapt(spans)
    assert [(t.metadata["response_id"], t.reward) for t in reviewer] == [("p2", 1.0)]


def test_without_tracer_spans_every_call_is_kept_but_agent_match_cannot_select() -> None:
    spans = two_agent_rollout(with_tracer=False)
    triplets = LlmProxyTraceToTriplet().adapt(spans)
    assert [(t.metadata["agent_name"], t.reward) for t in triplets] == [(None, 0.5), (None, 1.0)]
    kept, report = LlmProxyTraceToTriplet(agent_match="writer").adapt_with_report(spans)
    assert kept == []
    problem = report.get("proxy_calls_not_joined")
    assert problem is not None and problem.severity == "warning" and len(problem.span_ids) == 2


def test_duplicates_missing_ids_and_strict_sequence_order() -> None:
    b = TraceBuilder()
    proxy_span(b, "x1", [1], [2])
    proxy_span(b, "x1", [1], [2])  # recorded twice
    proxy_span(b, "x2", [3], None)  # the server returned no response ids
    b.reward(5, 0.7)
    b.reward(6, 0.9)
    spans = b.spans()
    # the duplicate and x2 precede the rewards; the second reward shares x1's sequence id (not strictly after)
    seqs = {0: 1, 1: 2, 2: 3, 3: 4, 4: 1}
    spans = [s.model_copy(update={"sequence_id": seqs[i]}) for i, s in enumerate(spans)]
    triplets, report = LlmProxyTraceToTriplet().adapt_with_report(spans)
    assert [(t.metadata["response_id"], t.reward) for t in triplets] == [("x1", 0.7)]
    assert report.get("duplicate_llm_calls") is not None
    missing = report.get("missing_token_ids")
    assert missing is not None and missing.message == (
        "1 of 2 LLM calls have no response token ids, so they cannot be used for RL training. "
        "1 of them were dropped for that reason."
    )
    late = report.get("reward_unattributed")
    assert late is not None and late.message.endswith(
        "no usable proxy call has a sequence id smaller than its own (1)."
    )


def test_agent_lightning_03_litellm_spans() -> None:
    b = TraceBuilder()
    raw = {
        "llm.hosted_vllm.id": "v1",
        "llm.hosted_vllm.prompt_token_ids": "[11, 12, 13]",
        "llm.hosted_vllm.response_token_ids": "[[14, 15]]",
    }
    fallback = {"llm.hosted_vllm.id": "v2", "llm.hosted_vllm.prompt_token_ids": "[1]"}
    fallback["llm.hosted_vllm.choices.0.token_ids"] = "[2, 3]"
    with b.span("raw_gen_ai_request", 0, 1, **raw):
        pass
    with b.span("raw_gen_ai_request", 2, 3, **fallback):
        pass
    with b.span(
        "litellm_request", 4, 5, prompt_token_ids=[7], response_token_ids=[8], **{"gen_ai.response.id": "v3"}
    ):
        pass
    b.reward(6, 1.0)
    triplets = LlmProxyTraceToTriplet().adapt(b.spans())
    assert [(t.prompt["token_ids"], t.response["token_ids"]) for t in triplets] == [
        ([11, 12, 13], [14, 15]),
        ([1], [2, 3]),
        ([7], [8]),
    ]
    assert [t.reward for t in triplets] == [None, None, 1.0]


async def test_real_proxy_and_tracer_spans_join_by_response_id() -> None:
    """An agent calls the model through agl's LLM proxy while the tracer records its structure."""
    store = InMemoryLightningStore()
    tracer = OtelTracer(flush_timeout=10.0)
    tracer.init_worker(0, store)
    try:
        async with FakeOpenAIServer() as server, LLMProxy({"policy": server.base_url}, store=store) as proxy:
            attempted = await store.start_rollout({"task": 1})
            rid, aid = attempted.rollout_id, attempted.attempt.attempt_id
            client = openai.AsyncOpenAI(api_key="k", base_url=proxy.as_resource(rid, aid).endpoint)
            async with tracer.trace_context(rollout_id=rid, attempt_id=aid) as otel:
                for agent in ("writer", "reviewer"):
                    with otel.start_as_current_span(
                        f"invoke_agent {agent}", attributes={"gen_ai.agent.name": agent}
                    ):
                        messages: Any = [user(f"{agent} go")]
                        await client.chat.completions.create(model="policy", messages=messages)
                emit_reward(1.0)
            await client.close()
            assert await proxy.flush(timeout=10)
    finally:
        tracer.teardown_worker(0)
    spans = list(await store.query_spans(rid))
    triplets = LlmProxyTraceToTriplet().adapt(spans)
    assert [(t.metadata["agent_name"], t.reward) for t in triplets] == [("writer", None), ("reviewer", 1.0)]
    tokenizer = server.tokenizer
    assert triplets[1].response["token_ids"] == tokenizer.encode("reviewer go")
    assert all(t.metadata["tracer_span_id"] is not None for t in triplets)
    (reviewer,) = LlmProxyTraceToTriplet(agent_match="^reviewer$").adapt(spans)
    assert reviewer.metadata["response_id"] == triplets[1].metadata["response_id"]
    await store.close()
