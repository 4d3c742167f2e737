"""Throughput of the hot LightningStore operations, compared with Agent Lightning 0.3.0.

Usage:
    python bench/store_bench.py --store memory|sqlite|http|postgres|mongo|<store URI>
        [--clients N] [--client-processes N] [--scale F] [--repeat R] [--server-store URI]
        [--only OP ...] [--peer-python PYTHON]

Prints JSON: per operation the wall-clock ``rate`` (ops/s; spans/s for add_many_spans), for in-process
clients also ``rate_per_client_cpu_second`` (units per CPU-second of the benchmark process: the same
figure with other load on the machine factored out; for http it excludes the server's CPU), the
Agent Lightning 0.3.0 reference numbers measured on this machine and ``ratio`` = rate / reference.
``--repeat`` (default 3 for memory, 1 otherwise) runs each operation on that many fresh stores and
reports medians.

``--peer-python PYTHON`` (an interpreter with ``agentlightning==0.3.0``) also runs the same workload
on Agent Lightning right before each of agl's operations (`peer_store_bench.py`: its in-memory store,
or its HTTP server for ``--store http``) and adds ``peer_rate`` and ``peer_ratio``: the comparison
made on the same machine at the same moment, which matters because this machine's speed drifts by a
third or more between minutes. The fixed reference numbers stay the targets of record.

Operations (counts at ``--scale 1``): 10k ``enqueue_rollout``; 10k ``dequeue_rollout`` (each claim
starts an attempt); 100k ``add_span``; 100k spans through ``add_many_spans`` in batches of 100;
10k ``update_attempt`` (each sets a worker's
attempt to ``succeeded``, which propagates to the rollout and the worker).

Honesty rules: every operation runs on a fresh store (``memory``: a new instance; ``sqlite``: a new
temporary file; ``http``: a new ``agl store serve`` process backed by ``--server-store``) whose state
is prepared before the clock starts; spans are built before timing; a single client awaits each call
before the next. ``--clients N`` splits the work over N asyncio tasks sharing one store object;
``--client-processes N`` over N processes with their own client each (not for ``memory``, which
lives in one process). A store URI other than the three shortcuts is opened as given and shared by
all operations.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from store_workload import OPERATION_COUNTS, SPAN_TEMPLATE_FIELDS, spans_from_template, start_many

from agl_core.store import LightningStore, open_store
from agl_core.types import EnqueueRolloutRequest, Span

REFERENCE_IN_MEMORY: dict[str, float] = {
    "enqueue_rollout": 7520,
    "dequeue_rollout": 3041,
    "add_span": 4668,
    "add_many_spans": 5606,
    "update_attempt": 5763,
}
"""Agent Lightning 0.3.0 `InMemoryLightningStore` on this machine (ops/s; spans/s for add_many_spans)."""

REFERENCE_HTTP_ONE_CLIENT: dict[str, float] = {
    "enqueue_rollout": 425,
    "dequeue_rollout": 407,
    "add_span": 318,
    "add_many_spans": 327,
    "update_attempt": 376,
}
"""Agent Lightning 0.3.0 over HTTP with one client on this machine (same units)."""

TARGET_RATIO: dict[str, float] = {"memory": 10.0, "sqlite": 2.0, "http": 10.0}
"""The targets: memory and SQLite at least this multiple of the in-memory reference (issue 3), HTTP of
the HTTP reference (issue 4)."""

TARGET_MINIMUM: dict[str, dict[str, float]] = {"http": {"add_many_spans": 20_000}}
"""Absolute targets on top of the ratios (issue 4: ``add_many_spans`` over HTTP at least 20k spans/s)."""

HEALTH_PATH = "/v1/agl/health"
SERVER_START_TIMEOUT = 60.0


# ---------------------------------------------------------------------------------------------- stores


def free_port() -> int:
    """A TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_health(url: str, process: subprocess.Popen[Any], timeout: float) -> None:
    """Poll the server's health endpoint until it answers 200; fail if it exits or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"`agl store serve` exited with code {process.returncode} before becoming healthy"
            )
        try:
            with urllib.request.urlopen(url, timeout=1.0) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"`agl store serve` did not answer {url} within {timeout:.0f}s")


@contextlib.contextmanager
def http_server(server_store: str) -> Any:
    """Run ``agl store serve`` in its own process; yields its store URI."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agl_core.cli",
            "store",
            "serve",
            "--store",
            server_store,
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        try:
            wait_for_health(f"http://127.0.0.1:{port}{HEALTH_PATH}", process, SERVER_START_TIMEOUT)
        except RuntimeError as exc:
            process.kill()
            stderr = process.communicate(timeout=10)[1].decode(errors="replace")
            raise RuntimeError(f"{exc}\n{stderr[-2000:]}") from None
        yield f"http://127.0.0.1:{port}"
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@dataclass
class StoreSource:
    """How to get a fresh store for one operation: a URI plus the setup/teardown around it."""

    kind: str
    uri: str
    server_store: str
    scratch: str

    @contextlib.asynccontextmanager
    async def fresh(self) -> AsyncIterator[str]:
        """Yield the URI of a store prepared for one operation (fresh unless a custom URI was given)."""
        if self.kind == "memory":
            yield "memory:"
        elif self.kind == "sqlite":
            path = tempfile.mkdtemp(dir=self.scratch)
            yield f"sqlite:///{os.path.join(path, 'bench.db')}"
        elif self.kind == "http":
            server_store = self.server_store
            if server_store == "sqlite":
                server_store = f"sqlite:///{os.path.join(tempfile.mkdtemp(dir=self.scratch), 'server.db')}"
            with http_server(server_store) as uri:
                yield uri
        elif self.kind == "postgres":  # a fresh schema per operation (agl-postgres must be installed)
            base = self.uri or os.environ.get("AGL_BENCH_POSTGRES_URI", "")
            cluster = None
            if not base:
                from agl_postgres.testing import PgCluster

                # PostgreSQL's defaults (fsync on) unless AGL_BENCH_POSTGRES_FSYNC=off, which keeps
                # SQLite's synchronous=NORMAL guarantee (a killed process loses nothing; an OS crash may)
                durable = os.environ.get("AGL_BENCH_POSTGRES_FSYNC", "on") != "off"
                cluster = PgCluster(durable=durable).init().start()
                base = cluster.uri
            try:
                sep = "&" if "?" in base else "?"
                yield f"{base}{sep}schema=bench_{os.urandom(4).hex()}&pool_max_size=16"
            finally:
                if cluster is not None:
                    cluster.destroy()
        elif self.kind == "mongo":  # nx-27017 (agl-mongo's test server), a fresh database per operation
            base = self.uri or os.environ.get("AGL_BENCH_MONGO_URI", "")
            server = None
            if not base:
                from pathlib import Path

                sys.path.insert(
                    0, str(Path(__file__).resolve().parents[1] / "plugins" / "agl-mongo" / "tests")
                )
                from nx_server import NxServer  # needs agl-mongo[test]

                server = NxServer(Path(tempfile.mkdtemp(dir=self.scratch))).start()
                base = server.uri
            try:
                sep = "&" if "?" in base else "?"
                yield f"{base}{sep}database=bench_{os.urandom(4).hex()}"
            finally:
                if server is not None:
                    server.kill()
        else:
            yield self.uri


def resolve_source(store: str, server_store: str, scratch: str) -> StoreSource:
    """Map the ``--store`` argument to a `StoreSource`."""
    if store in ("memory", "sqlite", "http"):
        return StoreSource(store, "", server_store, scratch)
    if store in ("postgres", "mongo"):  # $AGL_BENCH_<NAME>_URI, else a throwaway server per operation
        return StoreSource(store, "", server_store, scratch)
    if store in ("memory:",):
        return StoreSource("memory", "", server_store, scratch)
    return StoreSource("uri", store, server_store, scratch)


# ---------------------------------------------------------------------------------------------- operations

SPAN_TEMPLATE = Span.from_attributes(**SPAN_TEMPLATE_FIELDS)


def make_spans(targets: list[tuple[str, str]], per_target: int) -> list[Span]:
    """`per_target` spans for each ``(rollout_id, attempt_id)``, with sequence ids 1.. per rollout."""
    return spans_from_template(SPAN_TEMPLATE, targets, per_target)


def split(items: list[Any], parts: int) -> list[list[Any]]:
    """`items` in `parts` contiguous chunks of near-equal size."""
    size, extra = divmod(len(items), parts)
    chunks, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        chunks.append(items[start:end])
        start = end
    return chunks


async def enqueue_many(store: LightningStore, count: int) -> None:
    for start in range(0, count, 1000):
        batch = [EnqueueRolloutRequest(input={"task": i}) for i in range(start, min(count, start + 1000))]
        await store.enqueue_many_rollouts(batch)


@dataclass
class Operation:
    """One measured operation: untimed `prepare` (shared store) and `build` (per client), timed `work`."""

    name: str
    unit: str
    prepare: Callable[[LightningStore, int, int], Awaitable[list[Any]]]
    """(store, count, clients) -> one picklable payload per client."""
    build: Callable[[Any], Any]
    """payload -> what `work` consumes (runs in the client, untimed)."""
    work: Callable[[LightningStore, Any], Awaitable[int]]
    """(store, built) -> units done; this is what the clock measures."""


async def prep_enqueue(store: LightningStore, count: int, clients: int) -> list[Any]:
    return [(index, len(chunk)) for index, chunk in enumerate(split(list(range(count)), clients))]


async def work_enqueue(store: LightningStore, built: tuple[int, int]) -> int:
    client, count = built
    for i in range(count):
        await store.enqueue_rollout({"task": i, "client": client})
    return count


async def prep_dequeue(store: LightningStore, count: int, clients: int) -> list[Any]:
    await enqueue_many(store, count)
    return [(f"worker-{index}", len(chunk)) for index, chunk in enumerate(split(list(range(count)), clients))]


async def work_dequeue(store: LightningStore, built: tuple[str, int]) -> int:
    worker, count = built
    claimed = 0
    for _ in range(count):
        if await store.dequeue_rollout(worker_id=worker) is not None:
            claimed += 1
    if claimed != count:
        raise RuntimeError(f"dequeue_rollout claimed {claimed} of {count} queued rollouts")
    return claimed


async def prep_spans(store: LightningStore, count: int, clients: int) -> list[Any]:
    rollouts = max(clients, count // 100)
    targets = await start_many(store, rollouts)
    return [(chunk, count // rollouts) for chunk in split(targets, clients)]


def build_spans(payload: tuple[list[tuple[str, str]], int]) -> list[Span]:
    targets, per_target = payload
    return make_spans([tuple(t) for t in targets], per_target)  # type: ignore[misc]


async def work_add_span(store: LightningStore, spans: list[Span]) -> int:
    for span in spans:
        await store.add_span(span)
    return len(spans)


async def work_add_many_spans(store: LightningStore, spans: list[Span]) -> int:
    added = 0
    for start in range(0, len(spans), 100):
        added += len(await store.add_many_spans(spans[start : start + 100]))
    if added != len(spans):
        raise RuntimeError(f"add_many_spans stored {added} of {len(spans)} spans")
    return added


async def prep_update(store: LightningStore, count: int, clients: int) -> list[Any]:
    started = await start_many(store, count, worker="bench-worker")
    return split(started, clients)


async def work_update(store: LightningStore, targets: list[tuple[str, str]]) -> int:
    for rollout_id, attempt_id in targets:
        await store.update_attempt(rollout_id, attempt_id, status="succeeded")
    return len(targets)


def identity(payload: Any) -> Any:
    return payload


OPERATIONS: list[Operation] = [
    Operation("enqueue_rollout", "ops/s", prep_enqueue, identity, work_enqueue),
    Operation("dequeue_rollout", "ops/s", prep_dequeue, identity, work_dequeue),
    Operation("add_span", "ops/s", prep_spans, build_spans, work_add_span),
    Operation("add_many_spans", "spans/s", prep_spans, build_spans, work_add_many_spans),
    Operation("update_attempt", "ops/s", prep_update, identity, work_update),
]


# ---------------------------------------------------------------------------------------------- running


async def run_in_process(
    op: Operation, uri: str, options: dict[str, Any], count: int, clients: int
) -> tuple[int, float, float]:
    """Prepare, then time `clients` asyncio tasks sharing one store object.

    Returns units done, wall seconds and this process's CPU seconds (all threads) while timing.
    """
    store = open_store(uri, **options)
    try:
        payloads = await op.prepare(store, count, clients)
        built = [op.build(p) for p in payloads]
        gc.collect()  # start from a clean heap; the collector stays on while timing
        cpu_start = time.process_time()
        start = time.perf_counter()
        done = await asyncio.gather(*(op.work(store, b) for b in built))
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
    finally:
        await store.close()
    return sum(done), elapsed, cpu


def _child(op_name: str, uri: str, options: dict[str, Any], payload: Any, barrier: Any, results: Any) -> None:
    op = next(o for o in OPERATIONS if o.name == op_name)

    async def main() -> None:
        store = open_store(uri, **options)
        try:
            built = op.build(payload)
            gc.collect()
            await store.get_latest_resources()  # connect before the clock starts
            barrier.wait(timeout=120)
            start = time.monotonic()  # CLOCK_MONOTONIC: comparable across processes
            done = await op.work(store, built)
            results.put((done, start, time.monotonic()))
        finally:
            await store.close()

    try:
        asyncio.run(main())
    except BaseException as exc:
        barrier.abort()  # release the other clients instead of leaving them at the barrier
        results.put(("error", f"{type(exc).__name__}: {exc}", 0.0))
        raise


async def run_in_processes(
    op: Operation, uri: str, options: dict[str, Any], count: int, processes: int
) -> tuple[int, float]:
    """Prepare here, then time `processes` client processes (wall time: first start to last end)."""
    store = open_store(uri)
    try:
        payloads = await op.prepare(store, count, processes)
    finally:
        await store.close()
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(processes)
    results = ctx.Queue()
    children = [
        ctx.Process(target=_child, args=(op.name, uri, options, p, barrier, results)) for p in payloads
    ]
    for child in children:
        child.start()
    reports = [results.get(timeout=600) for _ in children]
    for child in children:
        child.join(timeout=60)
    errors = [r[1] for r in reports if r[0] == "error"]
    if errors or any(child.exitcode != 0 for child in children):
        raise RuntimeError(f"a client process for {op.name} failed: {errors or 'nonzero exit code'}")
    done = sum(r[0] for r in reports)
    return done, max(r[2] for r in reports) - min(r[1] for r in reports)


def measure_peer(python: str, kind: str, op_name: str, args: argparse.Namespace) -> float:
    """Agent Lightning 0.3.0's rate for `op_name`, measured now by `peer_store_bench.py` under `python`."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer_store_bench.py")
    command = [python, script, "--store", kind, "--only", op_name, "--scale", str(args.scale)]
    command += ["--repeat", str(args.repeat)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the peer benchmark failed ({' '.join(command)}):\n{done.stderr[-2000:]}")
    return float(json.loads(done.stdout)["results"][op_name]["rate"])


async def measure(op: Operation, source: StoreSource, args: argparse.Namespace) -> dict[str, Any]:
    count = max(args.clients, args.client_processes, int(OPERATION_COUNTS[op.name] * args.scale))
    rates: list[float] = []
    seconds: list[float] = []
    cpu_rates: list[float] = []
    for _ in range(args.repeat):
        async with source.fresh() as uri:
            options: dict[str, Any] = {}
            if args.client_processes > 1:
                done, elapsed = await run_in_processes(op, uri, options, count, args.client_processes)
            else:
                done, elapsed, cpu = await run_in_process(op, uri, options, count, args.clients)
                cpu_rates.append(done / max(cpu, 1e-9))
        rates.append(done / elapsed)
        seconds.append(elapsed)
    result: dict[str, Any] = {
        "count": count,
        "unit": op.unit,
        "seconds": round(statistics.median(seconds), 4),
        "rate": round(statistics.median(rates), 1),
    }
    if cpu_rates:  # units per CPU-second of this process: insensitive to other load on the machine
        result["rate_per_client_cpu_second"] = round(statistics.median(cpu_rates), 1)
    return result


def reference_for(source: StoreSource, store_arg: str) -> tuple[str, dict[str, float]]:
    if source.kind == "http" or store_arg.startswith(("http://", "https://")):
        return "agentlightning_0.3.0_http_one_client", REFERENCE_HTTP_ONE_CLIENT
    return "agentlightning_0.3.0_in_memory", REFERENCE_IN_MEMORY


async def run(args: argparse.Namespace) -> dict[str, Any]:
    scratch = tempfile.mkdtemp(prefix="agl-store-bench-")
    try:
        source = resolve_source(args.store, args.server_store, scratch)
        if source.kind == "memory" and args.client_processes > 1:
            raise SystemExit(
                "--client-processes needs a shared store (sqlite, http or a URI); memory is per process"
            )
        reference_name, reference = reference_for(source, args.store)
        target = TARGET_RATIO.get(source.kind)
        selected = [o for o in OPERATIONS if not args.only or o.name in args.only]
        results: dict[str, Any] = {}
        peer_kind = "http" if reference is REFERENCE_HTTP_ONE_CLIENT else "memory"
        for op in selected:
            peer_rate = None
            if args.peer_python:
                peer_rate = await asyncio.to_thread(measure_peer, args.peer_python, peer_kind, op.name, args)
            result = await measure(op, source, args)
            result["reference"] = reference[op.name]
            result["ratio"] = round(result["rate"] / reference[op.name], 2)
            if target is not None:
                minimum = TARGET_MINIMUM.get(source.kind, {}).get(op.name, 0.0)
                result["meets_target"] = result["ratio"] >= target and result["rate"] >= minimum
            if peer_rate is not None:
                result["peer_rate"] = peer_rate
                result["peer_ratio"] = round(result["rate"] / peer_rate, 2)
            results[op.name] = result
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report: dict[str, Any] = {
        "benchmark": "store",
        "store": args.store,
        "server_store": args.server_store if source.kind == "http" else None,
        "clients": args.clients,
        "client_processes": args.client_processes,
        "scale": args.scale,
        "repeat": args.repeat,
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
        "results": results,
        "ratio_reference": reference_name,
        "peer": f"agentlightning 0.3.0 {peer_kind} via {args.peer_python}" if args.peer_python else None,
        "target_ratio": target,
        "reference": {
            "agentlightning_0.3.0_in_memory": REFERENCE_IN_MEMORY,
            "agentlightning_0.3.0_http_one_client": REFERENCE_HTTP_ONE_CLIENT,
        },
    }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", default="memory", help="memory, sqlite, http or any store URI")
    parser.add_argument(
        "--clients", type=int, default=1, help="concurrent asyncio clients (one store object)"
    )
    parser.add_argument(
        "--client-processes", type=int, default=1, help="client processes (shared stores only)"
    )
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every operation count (e.g. 0.1)")
    parser.add_argument(
        "--repeat", type=int, default=None, help="runs per operation, median reported (memory: 3, else 1)"
    )
    parser.add_argument(
        "--server-store", default="memory:", help="backend of the http server: memory: or sqlite (temp file)"
    )
    parser.add_argument(
        "--only", nargs="*", choices=[o.name for o in OPERATIONS], help="measure only these operations"
    )
    parser.add_argument(
        "--peer-python",
        help="interpreter with agentlightning==0.3.0: also measure it now, next to each operation",
    )
    args = parser.parse_args()
    if args.repeat is None:
        args.repeat = 3 if args.store in ("memory", "memory:") else 1
    if args.clients < 1 or args.client_processes < 1 or args.repeat < 1 or args.scale <= 0:
        parser.error("--clients, --client-processes and --repeat must be >= 1 and --scale > 0")
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
