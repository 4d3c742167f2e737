"""The workload of `store_bench.py`, run on Agent Lightning 0.3.0's stores (the peer agl replaces).

Run it with the interpreter of a virtual environment that has ``agentlightning==0.3.0`` (it imports
nothing from agl)::

    python -m venv /tmp/agl03 && /tmp/agl03/bin/pip install agentlightning==0.3.0
    /tmp/agl03/bin/python bench/peer_store_bench.py --only enqueue_rollout --scale 0.5

or let ``store_bench.py --peer-python /tmp/agl03/bin/python`` run it next to agl's numbers, so both
sides are measured on the same machine at the same moment (this machine's speed drifts by a third or
more from minute to minute, which a fixed reference table cannot follow).

Prints JSON ``{"results": {operation: {"count", "rate", "seconds"}}}``. The operations, counts and
honesty rules are `store_bench.py`'s: a fresh store per run, state prepared before the clock starts,
spans built before timing, one client awaiting each call. ``--store memory`` (the default) measures
its ``InMemoryLightningStore`` in process; ``--store http`` its ``LightningStoreServer`` in a child
process and ``LightningStoreClient`` here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import multiprocessing
import socket
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from store_workload import OPERATION_COUNTS, SPAN_TEMPLATE_FIELDS, spans_from_template, start_many


def make_spans(targets: list[tuple[str, str]], per_target: int) -> list[Any]:
    """The same spans as `store_bench.make_spans`, as Agent Lightning `Span` objects."""
    from agentlightning.types import Span

    return spans_from_template(Span.from_attributes(**SPAN_TEMPLATE_FIELDS), targets, per_target)


async def prepare(name: str, store: Any, count: int) -> Callable[[], Awaitable[int]]:
    """Set the store up for `name` (untimed); return the timed work."""
    if name == "enqueue_rollout":

        async def work() -> int:
            for i in range(count):
                await store.enqueue_rollout({"task": i, "client": 0})
            return count

    elif name == "dequeue_rollout":
        for i in range(count):
            await store.enqueue_rollout({"task": i})

        async def work() -> int:
            claimed = 0
            for _ in range(count):
                if await store.dequeue_rollout(worker_id="worker-0") is not None:
                    claimed += 1
            if claimed != count:
                raise RuntimeError(f"dequeue_rollout claimed {claimed} of {count} queued rollouts")
            return claimed

    elif name in ("add_span", "add_many_spans"):
        rollouts = max(1, count // 100)
        spans = make_spans(await start_many(store, rollouts), count // rollouts)
        if name == "add_span":

            async def work() -> int:
                for span in spans:
                    await store.add_span(span)
                return len(spans)

        else:

            async def work() -> int:
                for start in range(0, len(spans), 100):
                    await store.add_many_spans(spans[start : start + 100])
                return len(spans)

    elif name == "update_attempt":
        targets = await start_many(store, count, worker="bench-worker")

        async def work() -> int:
            for rollout_id, attempt_id in targets:
                await store.update_attempt(rollout_id, attempt_id, status="succeeded")
            return len(targets)

    else:
        raise SystemExit(f"unknown operation {name!r}")
    return work


def _serve(port: int, ready: Any) -> None:
    """Child process: Agent Lightning's HTTP server over its in-memory store."""
    from agentlightning.store import InMemoryLightningStore, LightningStoreServer

    async def main() -> None:
        server = LightningStoreServer(InMemoryLightningStore(), "127.0.0.1", port)
        await server.start()
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def fresh_store(kind: str) -> Any:
    """A new Agent Lightning store of `kind` (``memory`` or ``http``), closed afterwards."""
    if kind == "memory":
        from agentlightning.store import InMemoryLightningStore

        yield InMemoryLightningStore()
        return
    from agentlightning.store import LightningStoreClient

    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    port = _free_port()
    server = ctx.Process(target=_serve, args=(port, ready), daemon=True)
    server.start()
    try:
        if not await asyncio.to_thread(ready.wait, 120):
            raise RuntimeError("Agent Lightning's store server did not start within 120 s")
        client = LightningStoreClient(f"http://127.0.0.1:{port}")
        try:
            yield client
        finally:
            with contextlib.suppress(Exception):
                await client.close()
    finally:
        server.kill()
        server.join(timeout=30)


async def measure(name: str, kind: str, count: int, repeat: int) -> dict[str, Any]:
    rates, seconds = [], []
    for _ in range(repeat):
        async with fresh_store(kind) as store:
            work = await prepare(name, store, count)
            gc.collect()
            start = time.perf_counter()
            done = await work()
            elapsed = time.perf_counter() - start
        rates.append(done / elapsed)
        seconds.append(elapsed)
    return {
        "count": count,
        "rate": round(statistics.median(rates), 1),
        "seconds": round(statistics.median(seconds), 4),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    import agentlightning

    names = args.only or list(OPERATION_COUNTS)
    results = {
        name: await measure(name, args.store, max(1, int(OPERATION_COUNTS[name] * args.scale)), args.repeat)
        for name in names
    }
    return {
        "benchmark": "store",
        "system": f"agentlightning {agentlightning.__version__}",
        "store": args.store,
        "scale": args.scale,
        "repeat": args.repeat,
        "results": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", choices=["memory", "http"], default="memory")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every operation count")
    parser.add_argument("--repeat", type=int, default=1, help="runs per operation, median reported")
    parser.add_argument(
        "--only", nargs="*", choices=list(OPERATION_COUNTS), help="measure only these operations"
    )
    args = parser.parse_args()
    if args.scale <= 0 or args.repeat < 1:
        parser.error("--scale must be > 0 and --repeat >= 1")
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
