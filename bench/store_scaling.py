"""How the hot LightningStore operations and the process memory scale as a store fills.

Usage:
    python bench/store_scaling.py [--store memory|sqlite|http|all] [--sizes 1000,10000,100000]
        [--reps N] [--running N] [--keep DIR]

Each backend runs in its own process (``all``: memory, then sqlite; ``http`` is an ``agl store serve``
process on a temporary SQLite file, asked for by name because filling it is slow). The store is filled
in steps to each size in ``--sizes`` (rollouts, each with 10 spans: 1M spans at 100k rollouts); after
each step every operation below runs ``--reps`` times in each of 3 rounds, each call timed on its own,
and the least of the rounds' medians in microseconds is reported with its ratio to the one at the
first size (one round's median swings by up to 1.8x on a shared machine): ``us`` is CPU time of this
process (all its threads, so the SQLite store's too; for ``http`` the server's is not counted),
which leaves out waiting for a core on a busy machine, ``us_wall`` the wall-clock time. Each size's
figures are also written to stderr as soon as they are measured. ``--keep DIR`` (sqlite, http) fills
``DIR/scale.db`` instead of a temporary file and leaves it there, to profile the filled store.

Workload (what a long training run leaves behind): every rollout is claimed by a worker (ten
rollouts per worker id, so workers grow with the store), gets 10 LLM-call spans and succeeds
(filled in batches, see `Filler.grow_to`), except the newest ``--running`` rollouts (default 200), which stay
``running`` on their workers, so the running set and the busy workers stay the same size at every
store size.

Operations: ``start_rollout`` (then finished, untimed), ``enqueue_rollout``, ``dequeue_rollout``,
``add_span`` (one span to each claimed rollout), ``update_attempt`` (succeeds each claimed rollout),
``query_spans`` of one filled rollout (10 spans), ``query_rollouts_running``
(``status_in=["running"], limit=100``), ``query_rollouts_by_start_time`` (``sort_by="start_time",
sort_order="desc", limit=100``: the dashboard's "sort by start time"), ``query_workers_busy``
(``status_in=["busy"]``), ``get_rollout_by_id`` of a random filled rollout.

Memory: ``rss_bytes`` is the benchmark process's resident set after a garbage collection;
``bytes_per_span`` is its growth since the empty store divided by the spans stored (for ``memory``
this is the store's own footprint, rollouts and attempts included; for ``sqlite`` and ``http`` the
data is on disk, reported as ``db_bytes``). Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from store_workload import SPAN_TEMPLATE_FIELDS

from agl_core.store import LightningStore, open_store
from agl_core.types import AttemptedRollout, EnqueueRolloutRequest, Span

SPANS_PER_ROLLOUT = 10
ROLLOUTS_PER_WORKER = 10
FILL_BATCH = 1_000  # rollouts per enqueue_many_rollouts while filling
DEFAULT_SIZES = (1_000, 10_000, 100_000)
BACKENDS = ("memory", "sqlite")
TEMPLATE = Span.from_attributes(**SPAN_TEMPLATE_FIELDS)


def rss_bytes() -> int:
    """The resident set size of this process, in bytes (Linux ``/proc``; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def spans_for(rollout_id: str, attempt_id: str, first_seq: int, count: int) -> list[Span]:
    """`count` copies of the template span for one attempt, sequence ids from `first_seq`."""
    return [
        TEMPLATE.model_copy(
            update={
                "rollout_id": rollout_id,
                "attempt_id": attempt_id,
                "sequence_id": seq,
                "span_id": f"{seq:016x}",
                "attributes": {**TEMPLATE.attributes, "bench.rollout": rollout_id},
            }
        )
        for seq in range(first_seq, first_seq + count)
    ]


class Filler:
    """Grows one store to each size, keeping the ``running`` set and the busy workers constant."""

    def __init__(self, store: LightningStore, running: int) -> None:
        self.store = store
        self.running_limit = running
        self.size = 0
        self.filled: list[str] = []  # ids of rollouts holding their 10 spans
        self.running: list[tuple[str, str]] = []

    async def grow_to(self, target: int) -> None:
        """Add rollouts until `target` are stored by the filler; only the newest stay running.

        Filled in batches of `FILL_BATCH` rollouts: one ``enqueue_many_rollouts``, then per worker one
        ``dequeue_many_rollouts`` (its ten rollouts) and one ``add_many_spans`` (their 100 spans, so
        few spans are alive at once and the memory figures count the store, not the filler), and one
        ``update_attempt`` per finished rollout: the same store as starting each rollout on its worker
        with ``start_rollout``, at less than half the transactions.
        """
        store = self.store
        for rollout_id, attempt_id in self.running:
            await store.update_attempt(rollout_id, attempt_id, status="succeeded")
        self.running = []
        keep_running_from = target - self.running_limit
        while self.size < target:
            first = self.size
            count = min(FILL_BATCH, target - first)
            await store.enqueue_many_rollouts(
                [
                    EnqueueRolloutRequest(input={"task": "scale", "index": i})
                    for i in range(first, first + count)
                ]
            )
            claimed: list[AttemptedRollout] = []
            index = first
            while index < first + count:
                worker_id = f"worker-{index // ROLLOUTS_PER_WORKER:07d}"
                limit = min(ROLLOUTS_PER_WORKER - index % ROLLOUTS_PER_WORKER, first + count - index)
                got = await store.dequeue_many_rollouts(limit=limit, worker_id=worker_id)
                assert len(got) == limit, "the queue ran dry: another client is using this store"
                spans: list[Span] = []
                for attempted in got:
                    spans += spans_for(
                        attempted.rollout_id, attempted.attempt.attempt_id, 1, SPANS_PER_ROLLOUT
                    )
                await store.add_many_spans(spans)
                claimed.extend(got)
                index += limit
            for offset, attempted in enumerate(claimed):
                rollout_id, attempt_id = attempted.rollout_id, attempted.attempt.attempt_id
                if first + offset >= keep_running_from:
                    self.running.append((rollout_id, attempt_id))
                else:
                    await store.update_attempt(rollout_id, attempt_id, status="succeeded")
                self.filled.append(rollout_id)
            self.size += count


async def timed(calls: list[Callable[[], Awaitable[Any]]]) -> list[tuple[float, float]]:
    """Run each call, one after the other; the ``(cpu, wall)`` time of each, in microseconds.

    CPU time is this process's (all its threads: the SQLite store's included), so it leaves out the
    time spent waiting for a core on a busy machine.
    """
    wall, cpu = time.perf_counter, time.process_time
    took = []
    for call in calls:
        start_cpu, start_wall = cpu(), wall()
        await call()
        took.append(((cpu() - start_cpu) * 1e6, (wall() - start_wall) * 1e6))
    return took


async def measure(
    store: LightningStore, filler: Filler, reps: int, rng: random.Random
) -> tuple[dict[str, float], dict[str, float]]:
    """The median CPU and wall cost (µs) of every operation on the store as it is now."""
    results: dict[str, list[tuple[float, float]]] = {}
    started: list[Any] = []

    async def start(i: int) -> None:
        started.append(await store.start_rollout({"task": "probe", "index": i}, worker_id=f"probe-{i}"))

    results["start_rollout"] = await timed([lambda i=i: start(i) for i in range(reps)])
    for attempted in started:
        await store.update_attempt(attempted.rollout_id, attempted.attempt.attempt_id, status="succeeded")

    results["enqueue_rollout"] = await timed(
        [lambda i=i: store.enqueue_rollout({"task": "probe-queue", "index": i}) for i in range(reps)]
    )
    claimed: list[Any] = []

    async def dequeue(i: int) -> None:
        got = await store.dequeue_rollout(worker_id=f"probe-q-{i}")
        assert got is not None, "the queue ran dry: another client is using this store"
        claimed.append(got)

    results["dequeue_rollout"] = await timed([lambda i=i: dequeue(i) for i in range(reps)])
    one_span = [spans_for(a.rollout_id, a.attempt.attempt_id, 1, 1)[0] for a in claimed]
    results["add_span"] = await timed([lambda s=s: store.add_span(s) for s in one_span])
    results["update_attempt"] = await timed(
        [
            lambda a=a: store.update_attempt(a.rollout_id, a.attempt.attempt_id, status="succeeded")
            for a in claimed
        ]
    )
    picks = [rng.choice(filler.filled) for _ in range(reps)]
    results["query_spans"] = await timed([lambda r=r: store.query_spans(r) for r in picks])
    results["get_rollout_by_id"] = await timed([lambda r=r: store.get_rollout_by_id(r) for r in picks])
    results["query_rollouts_running"] = await timed(
        [lambda: store.query_rollouts(status_in=["running"], limit=100) for _ in range(reps)]
    )
    results["query_rollouts_by_start_time"] = await timed(
        [
            lambda: store.query_rollouts(sort_by="start_time", sort_order="desc", limit=100)
            for _ in range(reps)
        ]
    )
    results["query_workers_busy"] = await timed(
        [lambda: store.query_workers(status_in=["busy"]) for _ in range(reps)]
    )
    check = await store.query_rollouts(status_in=["running"], limit=100)
    assert check.total == filler.running_limit, f"expected {filler.running_limit} running, got {check.total}"
    cpu = {name: round(statistics.median(c for c, _ in values), 1) for name, values in results.items()}
    wall = {name: round(statistics.median(w for _, w in values), 1) for name, values in results.items()}
    return cpu, wall


async def run_backend(
    backend: str, sizes: list[int], reps: int, running: int, keep: str | None = None
) -> dict[str, Any]:
    """Fill one backend through `sizes`; per size the operation costs and the memory.

    `keep`: a directory for the database file (``scale.db``, which must not exist yet), left there
    afterwards to inspect or profile; None uses a temporary directory.
    """
    if keep is not None:
        os.makedirs(keep, exist_ok=True)
        if any(f.startswith("scale.db") for f in os.listdir(keep)):
            raise SystemExit(f"--keep {keep}: it already holds a scale.db; pick an empty directory.")
    with tempfile.TemporaryDirectory(prefix="agl-scaling-") as temp:
        scratch = keep if keep is not None else temp
        db_path = os.path.join(scratch, "scale.db")
        server = None
        if backend == "memory":
            uri = "memory:"
        elif backend == "sqlite":
            uri = f"sqlite:///{db_path}"
        else:
            from store_bench import http_server

            server = http_server(f"sqlite:///{db_path}")
            uri = server.__enter__()
        try:
            gc.collect()
            baseline = rss_bytes()
            store = open_store(uri)
            filler = Filler(store, running)
            rng = random.Random(21)
            steps = []
            for size in sizes:
                began = time.perf_counter()
                await filler.grow_to(size)
                fill_seconds = time.perf_counter() - began
                # The least of 3 rounds' medians: on a shared machine one round's median of an unchanged
                # operation swings by up to 1.8x between consecutive rounds at the same size.
                rounds = [await measure(store, filler, reps, rng) for _ in range(3)]
                costs = {op: min(cpu[op] for cpu, _ in rounds) for op in rounds[0][0]}
                wall_costs = {op: min(wall[op] for _, wall in rounds) for op in rounds[0][1]}
                gc.collect()
                rss = rss_bytes()
                stats = await store.statistics()
                spans = stats["total_spans"]
                step: dict[str, Any] = {
                    "rollouts": stats["total_rollouts"],
                    "spans": spans,
                    "workers": stats["total_workers"],
                    "fill_seconds": round(fill_seconds, 1),
                    "us": costs,
                    "us_wall": wall_costs,
                    "rss_bytes": rss,
                    "bytes_per_span": round((rss - baseline) / spans) if spans else None,
                }
                if backend != "memory":
                    step["db_bytes"] = sum(
                        os.path.getsize(os.path.join(scratch, f))
                        for f in os.listdir(scratch)
                        if f.startswith("scale.db")
                    )
                steps.append(step)
                print(f"{backend} {size}: {json.dumps(step)}", file=sys.stderr, flush=True)
            await store.close()
        finally:
            if server is not None:
                server.__exit__(None, None, None)
    first = steps[0]["us"]
    for step in steps:
        step["ratio_to_first"] = {
            name: round(cost / first[name], 2) if first[name] else None for name, cost in step["us"].items()
        }
    worst = {name: max(step["ratio_to_first"][name] for step in steps) for name in first}
    return {"backend": backend, "sizes": steps, "worst_ratio_to_first": worst}


def main() -> None:
    """Parse arguments; run each backend in a child process (clean memory figures) or this one."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="all", choices=(*BACKENDS, "http", "all"))
    parser.add_argument(
        "--sizes",
        default=",".join(str(s) for s in DEFAULT_SIZES),
        help="comma-separated store sizes in rollouts, increasing (default 1000,10000,100000)",
    )
    parser.add_argument("--reps", type=int, default=200, help="timed calls per operation and size")
    parser.add_argument("--running", type=int, default=200, help="rollouts kept running at every size")
    parser.add_argument(
        "--keep",
        metavar="DIR",
        help="sqlite/http: fill the database file DIR/scale.db and leave it there (to profile it)",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if not sizes or sizes != sorted(sizes) or sizes[0] <= args.running:
        parser.error(f"--sizes must increase and start above --running ({args.running}), got {args.sizes!r}")
    if args.keep is not None and args.store not in ("sqlite", "http"):
        parser.error("--keep needs --store sqlite or --store http (the memory store has no file)")
    if args.store != "all":
        result = asyncio.run(run_backend(args.store, sizes, args.reps, args.running, args.keep))
        print(json.dumps(result, indent=2))
        return
    results = []
    for backend in BACKENDS:
        command = [sys.executable, __file__, "--store", backend, "--sizes", args.sizes]
        command += ["--reps", str(args.reps), "--running", str(args.running)]
        out = subprocess.run(
            command,
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout
        results.append(json.loads(out))
    print(json.dumps({"sizes": sizes, "reps": args.reps, "backends": results}, indent=2))


if __name__ == "__main__":
    main()
