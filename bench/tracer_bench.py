"""Tracer overhead: µs added per traced LLM call and per emitted span, store flush included. Prints JSON.

LLM calls: a real ``openai`` client against ``agl_testing.fake_openai`` on 127.0.0.1, the same calls
without agl, with agl's instrumentation installed but no trace open, and inside ``trace_context`` (an
in-memory store; the exit flush is inside the timed region). Each round runs a small batch in every mode
back to back; overheads are medians (and quartiles) of the per-round differences, so HTTP and machine
noise common to neighbouring batches cancels out.

Spans: ``emit_reward`` and a plain OpenTelemetry span on the tracer, N per trace context, flush included;
``global_api_span_us`` is the same plain span made through the *global* API
(``opentelemetry.trace.get_tracer(...)``, what other instrumentations use) and captured by agl's bridge;
``otel_sdk_span_us`` is the bare SDK cost (a provider with no processor) for comparison.

Normalisation: ``normalise_llm_span_us`` is :func:`agl_core.adapter.genai.read_llm_call` per LLM span (an
agl chat span, an OpenInference span and an OpenLLMetry span in turn); ``triplet_adapter_span_us`` is
``TracerTraceToTriplet(repair_hierarchy=False).adapt`` per span of a rollout of agent, LLM, tool and reward
spans.

Per-span figures are medians over ``--span-rounds``; ``*_min_us`` (the fastest round) is the figure to
compare two builds on a busy machine, with ``--cpu-time`` (process CPU time instead of wall time).
``--spans-only`` skips the LLM calls (HTTP-bound and noisy). To compare with another checkout, run this
script with that checkout's ``agl_core`` first on ``PYTHONPATH``.

Usage: ``python bench/tracer_bench.py [--calls 20] [--rounds 25] [--spans 5000] [--span-rounds 5]
[--spans-only] [--cpu-time]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import openai
from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import TracerProvider

from agl_core.emitter import emit_reward
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer.otel import OtelTracer
from agl_testing.fake_openai import FakeOpenAIServer

_clock = time.perf_counter
"""Wall time by default; ``--cpu-time`` measures this process's CPU time (all threads) instead, which a
busy shared machine disturbs far less."""

MESSAGES = [{"role": "user", "content": "Summarize the plot of a short story in one sentence please."}]


def chat(client: openai.OpenAI, stream: bool) -> None:
    if stream:
        for _ in client.chat.completions.create(model="m", messages=MESSAGES, stream=True):  # type: ignore[arg-type]
            pass
    else:
        client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]


def timed_calls(client: openai.OpenAI, calls: int, stream: bool) -> float:
    start = _clock()
    for _ in range(calls):
        chat(client, stream)
    return (_clock() - start) / calls * 1e6


async def traced_calls(
    tracer: OtelTracer, store: InMemoryLightningStore, client: openai.OpenAI, calls: int, stream: bool
) -> float:
    attempted = await store.start_rollout(input={})
    start = _clock()
    async with tracer.trace_context(rollout_id=attempted.rollout_id, attempt_id=attempted.attempt.attempt_id):
        for _ in range(calls):
            chat(client, stream)
    elapsed = (_clock() - start) / calls * 1e6
    assert len(await store.query_spans(attempted.rollout_id)) == calls, "every LLM span must be stored"
    return elapsed


async def traced_spans(
    tracer: OtelTracer, store: InMemoryLightningStore, n: int, emit: Callable[[Any], None]
) -> float:
    attempted = await store.start_rollout(input={})
    start = _clock()
    async with tracer.trace_context(
        rollout_id=attempted.rollout_id, attempt_id=attempted.attempt.attempt_id
    ) as otel:
        for _ in range(n):
            emit(otel)
    elapsed = (_clock() - start) / n * 1e6
    assert len(await store.query_spans(attempted.rollout_id)) == n
    return elapsed


def llm_span_shapes() -> list[Any]:
    """Three LLM-call spans of the same call: agl's (OTel GenAI), OpenInference's and OpenLLMetry's."""
    from agl_core.types import Span

    user = "Summarize the plot of a short story in one sentence please."
    answer = "A girl finds a key, opens a door and meets herself."
    agl = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.response.id": "chatcmpl-1",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": user}]}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
        ),
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 13,
        "prompt_token_ids": list(range(12)),
        "response_token_ids": list(range(13)),
    }
    openinference = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "m",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": user,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": answer,
        "llm.token_count.prompt": 12,
        "llm.token_count.completion": 13,
    }
    openllmetry = {
        "llm.request.type": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": user,
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": answer,
        "gen_ai.usage.prompt_tokens": 12,
    }
    return [
        Span.from_attributes(attributes=attrs, name=name, rollout_id="r", attempt_id="a", sequence_id=i)
        for i, (name, attrs) in enumerate(
            [("chat m", agl), ("ChatOpenAI", openinference), ("openai.chat", openllmetry)]
        )
    ]


def normalise_us(n: int) -> float:
    """µs per LLM span read through the normalisation layer."""
    from agl_core.adapter.genai import read_llm_call

    spans = llm_span_shapes()
    for span in spans:  # warm up (imports, regex compilation)
        read_llm_call(span)
    start = _clock()
    for i in range(n):
        assert read_llm_call(spans[i % 3]) is not None
    return (_clock() - start) / n * 1e6


def rollout_spans(turns: int) -> list[Any]:
    """A rollout: an agent span holding ``turns`` x (LLM call, tool call), then a reward."""
    from agl_core.types import Span

    llm = llm_span_shapes()[0]
    spans: list[Any] = []
    agent = Span.from_attributes(
        attributes={"gen_ai.agent.name": "bench"}, name="invoke_agent bench", start_time=0.0, end_time=1e6
    )
    spans.append(agent)
    for turn in range(turns):
        t = float(turn * 10)
        spans.append(
            Span.from_attributes(
                attributes={**llm.attributes, "gen_ai.response.id": f"c{turn}"},
                name="chat m",
                parent_id=agent.span_id,
                start_time=t,
                end_time=t + 4,
                sequence_id=2 * turn + 1,
            )
        )
        spans.append(
            Span.from_attributes(
                attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"},
                name="execute_tool search",
                parent_id=agent.span_id,
                start_time=t + 5,
                end_time=t + 9,
                sequence_id=2 * turn + 2,
            )
        )
    spans.append(
        Span.from_attributes(
            attributes={"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": 1.0},
            name="agentlightning.annotation",
            parent_id=agent.span_id,
            start_time=1e5,
            end_time=1e5,
            sequence_id=2 * turns + 1,
        )
    )
    return spans


def triplet_adapter_us(turns: int) -> float:
    """µs per span of ``TracerTraceToTriplet().adapt`` on one rollout (hierarchy repair, which is
    quadratic in the spans of one level and reads no LLM attributes, left out)."""
    from agl_core.adapter import TracerTraceToTriplet

    spans = rollout_spans(turns)
    adapter = TracerTraceToTriplet(repair_hierarchy=False)
    adapter.adapt(spans[:5])  # warm up
    start = _clock()
    triplets = adapter.adapt(spans)
    elapsed = _clock() - start
    assert len(triplets) == turns and triplets[-1].reward == 1.0
    return elapsed / len(spans) * 1e6


def bare_sdk_span_us(n: int) -> float:
    tracer = TracerProvider().get_tracer("bench")
    start = _clock()
    for _ in range(n):
        tracer.start_span("plain").end()
    return (_clock() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20, help="LLM calls per round and mode")
    parser.add_argument("--spans", type=int, default=5000, help="spans per round")
    parser.add_argument("--rounds", type=int, default=25, help="LLM rounds (paired batches)")
    parser.add_argument("--span-rounds", type=int, default=5)
    parser.add_argument("--spans-only", action="store_true", help="skip the LLM-call rounds")
    parser.add_argument("--cpu-time", action="store_true", help="time with process CPU time, not wall time")
    args = parser.parse_args()
    global _clock
    if args.cpu_time:
        _clock = time.process_time

    store = InMemoryLightningStore()
    results: dict[str, Any] = {
        "calls_per_round": args.calls,
        "spans_per_round": args.spans,
        "llm_rounds": args.rounds,
        "span_rounds": args.span_rounds,
    }
    with FakeOpenAIServer(token_ids="always") as server:
        client = openai.OpenAI(api_key="bench", base_url=server.base_url)
        for stream in () if args.spans_only else (False, True):
            chat(client, stream)  # warm up connections
            rounds: dict[str, list[float]] = {"plain": [], "instrumented_untraced": [], "traced": []}
            for _ in range(args.rounds):
                rounds["plain"].append(timed_calls(client, args.calls, stream))
                tracer = OtelTracer()
                tracer.init_worker(0, store)
                try:
                    rounds["instrumented_untraced"].append(timed_calls(client, args.calls, stream))
                    rounds["traced"].append(
                        asyncio.run(traced_calls(tracer, store, client, args.calls, stream))
                    )
                finally:
                    tracer.teardown_worker(0)
            # Paired per-round differences: noise shared by neighbouring batches cancels out.
            traced = [t - p for t, p in zip(rounds["traced"], rounds["plain"], strict=True)]
            untraced = [u - p for u, p in zip(rounds["instrumented_untraced"], rounds["plain"], strict=True)]
            results["llm_call_stream" if stream else "llm_call"] = {
                "plain_us": round(statistics.median(rounds["plain"]), 1),
                "traced_us": round(statistics.median(rounds["traced"]), 1),
                "overhead_us": round(statistics.median(traced), 1),
                "overhead_us_quartiles": [round(q, 1) for q in statistics.quantiles(traced, n=4)],
                "overhead_untraced_us": round(statistics.median(untraced), 1),
            }

    tracer = OtelTracer(instrument_llm_clients=False)
    tracer.init_worker(0, store)
    try:
        reward_us = [
            asyncio.run(traced_spans(tracer, store, args.spans, lambda _o: emit_reward(1.0)))
            for _ in range(args.span_rounds)
        ]
        span_us: list[float] = []
        global_us: list[float] = []
        global_tracer = trace_api.get_tracer("bench.global")  # the bridge installed the global provider
        for _ in range(args.span_rounds):  # interleaved, so machine noise hits both alike
            span_us.append(
                asyncio.run(traced_spans(tracer, store, args.spans, lambda o: o.start_span("plain").end()))
            )
            global_us.append(
                asyncio.run(
                    traced_spans(
                        tracer, store, args.spans, lambda _o: global_tracer.start_span("plain").end()
                    )
                )
            )
    finally:
        tracer.teardown_worker(0)
    results["bridge_mode"] = tracer.bridge_mode
    normalise = [normalise_us(args.spans) for _ in range(args.span_rounds)]
    adapter = [triplet_adapter_us(min(args.spans // 2, 200)) for _ in range(args.span_rounds)]
    sdk = [bare_sdk_span_us(args.spans) for _ in range(args.span_rounds)]
    for name, values in (
        ("global_api_span", global_us),
        ("normalise_llm_span", normalise),
        ("triplet_adapter_span", adapter),
        ("emit_reward", reward_us),
        ("otel_span", span_us),
        ("otel_sdk_span", sdk),
    ):
        results[f"{name}_us"] = round(statistics.median(values), 2)
        results[f"{name}_min_us"] = round(min(values), 2)
    results["python"] = platform.python_version()
    results["openai"] = openai.__version__
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
