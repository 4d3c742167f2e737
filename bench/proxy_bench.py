"""Latency the LLM proxy adds per request, and the requests/s it sustains, against a fast local backend.

Usage:
    python bench/proxy_bench.py [--requests N] [--duration S] [--clients C] [--repeat R]
        [--mode recorded|plain|both] [--routes chat,responses,messages] [--loop auto|asyncio|uvloop]
        [--profile FILE]

Three processes: a minimal OpenAI-compatible backend (aiohttp, a fixed vLLM-style answer with 48 token
ids and their logprobs, about 3.6 KB), the proxy (``LLMProxy`` with an ``InMemoryLightningStore``), and
the client (this process, aiohttp). Modes: ``recorded`` sends to ``/rollout/{rid}/attempt/{aid}/v1``
so every request is recorded as a span; ``plain`` sends to ``/v1`` (forwarded, not recorded).
Routes: ``chat`` (``/chat/completions``, forwarded as is), ``responses`` (``/responses``, OpenAI
Responses) and ``messages`` (``/messages``, Anthropic Messages); the last two carry the same
conversation and are translated to chat completions for the backend, so their overhead (against the
backend's chat route, direct) includes both translations (the agl-proxy-translate plugin; without it the
default is ``chat`` alone).

* Latency, 1 client: sequential requests alternating between the backend directly and the proxy, in
  interleaved blocks so drift in machine load hits both alike; ``overhead_p50_ms`` is the proxy's
  p50 minus the direct p50 (likewise p99).
* Throughput, ``--clients`` concurrent clients (default 64): requests/s for ``--duration`` seconds,
  direct and through the proxy. ``proxy_cpu_us_per_request`` is the proxy process's CPU time per
  request, and ``proxy_rps_per_cpu_second`` its inverse: the rate one free core would sustain, a
  figure far less sensitive than wall-clock rates to other load on the machine.

Each measurement is repeated ``--repeat`` times (default 3) and the JSON reports every run plus the
best (lowest overhead, highest rate): the machine is shared, so the best run is the one least
disturbed; ``load_average_1min`` records how busy it was. ``proxy_stats`` checks that recorded runs
recorded every request. The proxy runs on uvloop when it is installed (``--loop auto``, as
``agl proxy serve`` does). ``--profile FILE`` writes a CPU-time cProfile of the proxy process.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import multiprocessing
import os
import statistics
import sys
import time
from typing import Any

import aiohttp

REQUEST = {
    "model": "bench-model",
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the capital of France? Answer in one word."},
    ],
    "temperature": 0.7,
    "max_tokens": 64,
}
RESPONSES_REQUEST = {
    "model": "bench-model",
    "instructions": "You are a helpful assistant.",
    "input": [{"role": "user", "content": "What is the capital of France? Answer in one word."}],
    "temperature": 0.7,
    "max_output_tokens": 64,
}
MESSAGES_REQUEST = {
    "model": "bench-model",
    "system": "You are a helpful assistant.",
    "messages": [{"role": "user", "content": "What is the capital of France? Answer in one word."}],
    "temperature": 0.7,
    "max_tokens": 64,
}
ROUTES = {
    "chat": ("/chat/completions", REQUEST),
    "responses": ("/responses", RESPONSES_REQUEST),
    "messages": ("/messages", MESSAGES_REQUEST),
}


def _backend_answer() -> bytes:
    ids = list(range(1000, 1048))
    answer = {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "bench-model",
        "prompt_token_ids": list(range(1, 40)),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Paris. " * 8},
                "finish_reason": "stop",
                "token_ids": ids,
                "logprobs": {
                    "content": [{"token": "Paris", "logprob": -0.01, "top_logprobs": []} for _ in ids]
                },
            }
        ],
        "usage": {"prompt_tokens": 39, "completion_tokens": 48, "total_tokens": 87},
    }
    return json.dumps(answer).encode()


def _serve_backend(ready: Any) -> None:
    from aiohttp import web

    body = _backend_answer()

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        ready.send(runner.addresses[0][1])
        await asyncio.Event().wait()

    asyncio.run(main())


def _serve_proxy(
    backend_url: str, conn: Any, profile: str | None, loop_name: str, record_interval: float
) -> None:
    if loop_name == "uvloop":
        import uvloop

        uvloop.install()
    from agl_core.llm_proxy import LLMProxy
    from agl_core.store.memory import InMemoryLightningStore

    async def main() -> None:
        store = InMemoryLightningStore(thread_safe=False)
        rollout = await store.start_rollout(input="bench")
        proxy = LLMProxy({"bench-model": backend_url}, store=store, record_interval=record_interval)
        async with proxy:
            conn.send((proxy.endpoint, rollout.rollout_id, rollout.attempt.attempt_id))
            loop = asyncio.get_running_loop()
            while True:  # commands: "cpu" -> CPU seconds used, "stats" -> flush and report, "stop" -> exit
                command = await loop.run_in_executor(None, conn.recv)
                if command == "stop":
                    break
                if command == "cpu":
                    conn.send(time.process_time())
                    continue
                await proxy.flush(timeout=30)
                stats = proxy.stats()
                stats["store_spans"] = (await store.statistics())["total_spans"]
                conn.send(stats)

    if profile:
        import cProfile

        profiler = cProfile.Profile(time.process_time)  # CPU time: other load on the machine is excluded
        profiler.enable()
        try:
            asyncio.run(main())
        finally:
            profiler.disable()
            profiler.dump_stats(profile)
    else:
        asyncio.run(main())


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def _latency(
    session: aiohttp.ClientSession, direct: str, proxied: str, requests: int, request: dict[str, Any]
) -> dict[str, float]:
    bodies = {direct: json.dumps(REQUEST).encode(), proxied: json.dumps(request).encode()}
    headers = {"Content-Type": "application/json"}
    times: dict[str, list[float]] = {"direct": [], "proxy": []}

    async def one(url: str) -> float:
        start = time.perf_counter()
        async with session.post(url, data=bodies[url], headers=headers) as response:
            await response.read()
            assert response.status == 200, response.status
        return time.perf_counter() - start

    for url in (direct, proxied):  # warm up connections and code paths
        for _ in range(200):
            await one(url)
    block = 50
    for _ in range(max(1, requests // block)):
        for name, url in (("direct", direct), ("proxy", proxied)):
            for _ in range(block):
                times[name].append(await one(url))
    d50, p50 = statistics.median(times["direct"]), statistics.median(times["proxy"])
    d99, p99 = _percentile(times["direct"], 0.99), _percentile(times["proxy"], 0.99)
    return {
        "requests_each": len(times["proxy"]),
        "direct_p50_ms": round(d50 * 1e3, 3),
        "proxy_p50_ms": round(p50 * 1e3, 3),
        "direct_p99_ms": round(d99 * 1e3, 3),
        "proxy_p99_ms": round(p99 * 1e3, 3),
        "overhead_p50_ms": round((p50 - d50) * 1e3, 3),
        "overhead_p99_ms": round((p99 - d99) * 1e3, 3),
    }


async def _proxy_cpu(conn: Any) -> float:
    """CPU seconds the proxy process has used so far."""
    conn.send("cpu")
    return float(await asyncio.get_running_loop().run_in_executor(None, conn.recv))


async def _throughput(
    session: aiohttp.ClientSession, url: str, clients: int, duration: float, request: dict[str, Any]
) -> tuple[float, int]:
    """Requests/s of ``clients`` concurrent request loops over ``duration`` seconds (after a 0.5 s
    warm-up), and the number of requests sent in all, warm-up included."""
    body = json.dumps(request).encode()
    headers = {"Content-Type": "application/json"}
    done = 0
    stop_at = 0.0

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()
                assert response.status == 200, response.status
            done += 1

    stop_at = time.perf_counter() + 0.5  # warm-up
    await asyncio.gather(*(worker() for _ in range(clients)))
    warm_up, done = done, 0
    start = time.perf_counter()
    stop_at = start + duration
    await asyncio.gather(*(worker() for _ in range(clients)))
    return done / (time.perf_counter() - start), warm_up + done


async def _throughput_run(
    session: aiohttp.ClientSession,
    direct: str,
    proxied: str,
    args: argparse.Namespace,
    conn: Any,
    request: dict[str, Any],
) -> dict[str, float]:
    direct_rps, _ = await _throughput(session, direct, args.clients, args.duration, REQUEST)
    before = await _proxy_cpu(conn)
    proxy_rps, proxied_count = await _throughput(session, proxied, args.clients, args.duration, request)
    cpu = await _proxy_cpu(conn) - before  # covers the warm-up too, hence the count including it
    return {
        "direct_rps": round(direct_rps, 1),
        "proxy_rps": round(proxy_rps, 1),
        "proxy_cpu_us_per_request": round(cpu / proxied_count * 1e6, 1),
        "proxy_rps_per_cpu_second": round(proxied_count / cpu, 1),
    }


async def _run(
    args: argparse.Namespace, direct: str, endpoint: str, rollout: tuple[str, str], conn: Any
) -> dict[str, Any]:
    modes = ["recorded", "plain"] if args.mode == "both" else [args.mode]
    base = endpoint.removesuffix("/v1")
    bases = {"recorded": f"{base}/rollout/{rollout[0]}/attempt/{rollout[1]}/v1", "plain": endpoint}
    out: dict[str, Any] = {}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        for mode, route in ((m, r) for m in modes for r in args.routes.split(",")):
            path, request = ROUTES[route]
            url = bases[mode] + path
            latency = [
                await _latency(session, direct, url, args.requests, request) for _ in range(args.repeat)
            ]
            rates = [
                await _throughput_run(session, direct, url, args, conn, request) for _ in range(args.repeat)
            ]
            best_rate = {
                "direct_rps": max(run["direct_rps"] for run in rates),
                "proxy_rps": max(run["proxy_rps"] for run in rates),
                "proxy_cpu_us_per_request": min(run["proxy_cpu_us_per_request"] for run in rates),
                "proxy_rps_per_cpu_second": max(run["proxy_rps_per_cpu_second"] for run in rates),
            }
            out[mode if route == "chat" else f"{mode}_{route}"] = {
                "latency_1_client": {
                    "best": min(latency, key=lambda run: run["overhead_p50_ms"]),
                    "runs": latency,
                },
                f"throughput_{args.clients}_clients": {"best": best_rate, "runs": rates},
            }
    conn.send("stats")
    stats = await asyncio.get_running_loop().run_in_executor(None, conn.recv)
    keys = (
        "requests",
        "requests_failed",
        "requests_unrecorded",
        "spans_written",
        "spans_failed",
        "spans_dropped",
    )
    out["proxy_stats"] = {key: stats[key] for key in keys}
    out["proxy_stats"]["store_spans"] = stats["store_spans"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--requests", type=int, default=2000, help="sequential requests per target for latency"
    )
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per throughput measurement")
    parser.add_argument("--clients", type=int, default=64, help="concurrent clients for throughput")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mode", choices=["recorded", "plain", "both"], default="both")
    translated = importlib.util.find_spec("agl_proxy_translate") is not None  # serves the other two
    parser.add_argument(
        "--routes",
        default="chat,responses,messages" if translated else "chat",
        help="comma-separated: chat, responses, messages (the last two need agl-proxy-translate)",
    )
    parser.add_argument("--profile", default=None, help="write a cProfile of the proxy process here")
    parser.add_argument("--record-interval", type=float, default=0.02, help="LLMProxy(record_interval=...)")
    parser.add_argument(
        "--loop",
        choices=["auto", "asyncio", "uvloop"],
        default="auto",
        help="event loop of the proxy process (auto: uvloop when installed, as `agl proxy serve` does)",
    )
    args = parser.parse_args()
    unknown = set(args.routes.split(",")) - set(ROUTES)
    if unknown:
        parser.error(f"unknown route(s) {sorted(unknown)}; choose from {sorted(ROUTES)}")
    loop_name = args.loop
    if loop_name == "auto":
        try:
            import uvloop  # noqa: F401

            loop_name = "uvloop"
        except ImportError:
            loop_name = "asyncio"

    ctx = multiprocessing.get_context("spawn")
    backend_recv, backend_send = ctx.Pipe(duplex=False)
    backend = ctx.Process(target=_serve_backend, args=(backend_send,), daemon=True)
    backend.start()
    if not backend_recv.poll(60):
        sys.exit("the benchmark backend did not start within 60s")
    direct_base = f"http://127.0.0.1:{backend_recv.recv()}/v1"
    parent, child = ctx.Pipe()
    proxy = ctx.Process(
        target=_serve_proxy,
        args=(direct_base, child, args.profile, loop_name, args.record_interval),
        daemon=True,
    )
    proxy.start()
    if not parent.poll(60):
        sys.exit("the proxy did not start within 60s")
    endpoint, rollout_id, attempt_id = parent.recv()
    load_before = os.getloadavg()[0]
    try:
        results = asyncio.run(
            _run(args, direct_base + "/chat/completions", endpoint, (rollout_id, attempt_id), parent)
        )
    finally:
        parent.send("stop")
        proxy.join(30)
        backend.terminate()
        backend.join(10)
    try:
        import orjson  # noqa: F401

        json_library = "orjson"
    except ImportError:
        json_library = "json"
    report = {
        "benchmark": "llm_proxy",
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "aiohttp": aiohttp.__version__,
        "json_library": json_library,
        "proxy_event_loop": loop_name,
        "settings": vars(args),
        "load_average_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        "targets": {"overhead_p50_ms_below": 1.0, "proxy_rps_at_least": 1500},
        **results,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
