"""Tracer overhead: µs added per traced LLM call and per emitted span, store flush included. Prints JSON.

LLM calls: a real ``openai`` client against ``agl_core.testing.fake_openai`` on 127.0.0.1, the same calls
without agl, with agl's instrumentation installed but no trace open, and inside ``trace_context`` (an
in-memory store; the exit flush is inside the timed region). Each round runs a small batch in every mode
back to back; overheads are medians (and quartiles) of the per-round differences, so HTTP and machine
noise common to neighbouring batches cancels out.

Spans: ``emit_reward`` and a plain OpenTelemetry span on the tracer, N per trace context, flush included;
``otel_sdk_span_us`` is the bare SDK cost (a provider with no processor) for comparison.

Usage: ``python bench/tracer_bench.py [--calls 20] [--rounds 25] [--spans 5000] [--span-rounds 5]``
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
from opentelemetry.sdk.trace import TracerProvider

from agl_core.emitter import emit_reward
from agl_core.store.memory import InMemoryLightningStore
from agl_core.testing.fake_openai import FakeOpenAIServer
from agl_core.tracer.otel import OtelTracer

MESSAGES = [{"role": "user", "content": "Summarize the plot of a short story in one sentence please."}]


def chat(client: openai.OpenAI, stream: bool) -> None:
    if stream:
        for _ in client.chat.completions.create(model="m", messages=MESSAGES, stream=True):  # type: ignore[arg-type]
            pass
    else:
        client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]


def timed_calls(client: openai.OpenAI, calls: int, stream: bool) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        chat(client, stream)
    return (time.perf_counter() - start) / calls * 1e6


async def traced_calls(
    tracer: OtelTracer, store: InMemoryLightningStore, client: openai.OpenAI, calls: int, stream: bool
) -> float:
    attempted = await store.start_rollout(input={})
    start = time.perf_counter()
    async with tracer.trace_context(rollout_id=attempted.rollout_id, attempt_id=attempted.attempt.attempt_id):
        for _ in range(calls):
            chat(client, stream)
    elapsed = (time.perf_counter() - start) / calls * 1e6
    assert len(await store.query_spans(attempted.rollout_id)) == calls, "every LLM span must be stored"
    return elapsed


async def traced_spans(
    tracer: OtelTracer, store: InMemoryLightningStore, n: int, emit: Callable[[Any], None]
) -> float:
    attempted = await store.start_rollout(input={})
    start = time.perf_counter()
    async with tracer.trace_context(
        rollout_id=attempted.rollout_id, attempt_id=attempted.attempt.attempt_id
    ) as otel:
        for _ in range(n):
            emit(otel)
    elapsed = (time.perf_counter() - start) / n * 1e6
    assert len(await store.query_spans(attempted.rollout_id)) == n
    return elapsed


def bare_sdk_span_us(n: int) -> float:
    tracer = TracerProvider().get_tracer("bench")
    start = time.perf_counter()
    for _ in range(n):
        tracer.start_span("plain").end()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20, help="LLM calls per round and mode")
    parser.add_argument("--spans", type=int, default=5000, help="spans per round")
    parser.add_argument("--rounds", type=int, default=25, help="LLM rounds (paired batches)")
    parser.add_argument("--span-rounds", type=int, default=5)
    args = parser.parse_args()

    store = InMemoryLightningStore()
    results: dict[str, Any] = {
        "calls_per_round": args.calls,
        "spans_per_round": args.spans,
        "llm_rounds": args.rounds,
        "span_rounds": args.span_rounds,
    }
    with FakeOpenAIServer(token_ids="always") as server:
        client = openai.OpenAI(api_key="bench", base_url=server.base_url)
        for stream in (False, True):
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
        span_us = [
            asyncio.run(traced_spans(tracer, store, args.spans, lambda o: o.start_span("plain").end()))
            for _ in range(args.span_rounds)
        ]
    finally:
        tracer.teardown_worker(0)
    results["emit_reward_us"] = round(statistics.median(reward_us), 2)
    results["otel_span_us"] = round(statistics.median(span_us), 2)
    results["otel_sdk_span_us"] = round(
        statistics.median(bare_sdk_span_us(args.spans) for _ in range(args.span_rounds)), 2
    )
    results["python"] = platform.python_version()
    results["openai"] = openai.__version__
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
