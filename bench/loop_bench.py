"""Rollouts per second through the whole training loop: algorithm -> store -> runners (tracer on) -> store.

Usage:
    python bench/loop_bench.py [--rollouts N] [--runners 1,4,8] [--strategies shm,cs,ray]
        [--algorithms baseline,drain] [--repeat R] [--progress]

``ray`` needs the agl-ray plugin (run from ``.venv-agl-ray``): a local Ray is started on loopback before
the clock (``ray_init_s``), each runner is an actor, and ``ray_overhead_ms_per_rollout`` compares its
time per rollout with ``cs`` at the same runner count.

Each configuration runs in a fresh Python process: ``Trainer(strategy=..., n_runners=...)`` with the
default tracer (`OtelTracer`), the default in-memory store and a trivial async agent that returns a
reward, over ``--rollouts`` tasks. Algorithms: ``baseline`` is ``agl.Baseline`` (queue capped at
``--queue`` rollouts, every finished rollout read back and passed through the adapter); ``drain``
enqueues in batches of 256 and only waits for completion (the loop's own overhead).

Prints JSON with, per configuration (medians over ``--repeat`` runs):

* ``rollouts_per_s``: rollouts / wall time of ``fit`` (runner processes, server start and shutdown
  included; the heavy modules, such as the OpenTelemetry SDK and ``openai``, are imported before);
* ``steady_rollouts_per_s``: rollouts / (last rollout end - first attempt start), from the store;
* ``rollouts_per_cpu_s``: rollouts per CPU-second of the whole run (this process and its runner
  processes), i.e. the throughput with other load on the machine factored out;
  (not for ``ray``: its actors are not child processes);
* ``worker_gap_ms``: p50/p99/max time a runner spent between finishing one attempt and starting its next
  one while rollouts were still waiting: the proof that runners do not sleep on poll intervals while work
  is queued.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import importlib
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

BATCH = 256
_WARM_MODULES = (
    "agl_core.tracer.otel",
    "agl_core.store.http.server",
    "agl_core.store.http.client",
    "openai",
    "agl_core.instrumentation.openai",
    "opentelemetry.instrumentation.openai_v2",
)


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _measure_store(store: Any, n_rollouts: int) -> dict[str, Any]:
    rollouts = list(await store.query_rollouts())
    assert len(rollouts) == n_rollouts, f"expected {n_rollouts} rollouts, found {len(rollouts)}"
    statuses = {r.status for r in rollouts}
    assert statuses == {"succeeded"}, statuses
    attempts = [r.attempt for r in rollouts]
    first_start = min(a.start_time for a in attempts)
    last_end = max(r.end_time for r in rollouts)
    enqueued = sorted(r.start_time for r in rollouts)
    started = sorted(a.start_time for a in attempts)
    by_worker: dict[str, list[Any]] = {}
    for attempt in attempts:
        by_worker.setdefault(attempt.worker_id, []).append(attempt)
    gaps: list[float] = []
    for worker_attempts in by_worker.values():
        worker_attempts.sort(key=lambda a: a.start_time)
        for previous, following in itertools.pairwise(worker_attempts):
            moment = previous.end_time
            waiting = bisect.bisect_right(enqueued, moment) - bisect.bisect_right(started, moment)
            if waiting > 0:  # work was queued when this runner became free
                gaps.append(max(0.0, following.start_time - moment))
    return {
        "steady_rollouts_per_s": n_rollouts / (last_end - first_start),
        "workers_used": len(by_worker),
        "worker_gap_ms": {
            "p50": _percentile(gaps, 0.5) * 1e3,
            "p99": _percentile(gaps, 0.99) * 1e3,
            "max": max(gaps, default=0.0) * 1e3,
        },
    }


def run_one(
    strategy: str, n_runners: int, algorithm_name: str, n_rollouts: int, queue: int, progress: bool
) -> None:
    """Run one configuration in this process and print its JSON line."""
    import agl_core as agl
    from agl_core.types import EnqueueRolloutRequest, PromptTemplate

    @agl.rollout
    async def trivial_agent(task: int, prompt_template: PromptTemplate) -> float:
        return float(task % 2)

    class Drain(agl.Algorithm):
        """Enqueue in batches, keeping at most two batches in flight; wait for everything to finish."""

        async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
            store = self.get_store()
            await store.add_resources(self.get_initial_resources() or {})
            tasks = list(train_dataset or [])
            pending: set[str] = set()
            position = 0
            while position < len(tasks) or pending:
                while len(pending) < 2 * BATCH and position < len(tasks):
                    batch = tasks[position : position + BATCH]
                    position += len(batch)
                    requests = [EnqueueRolloutRequest(input=t) for t in batch]
                    pending.update(r.rollout_id for r in await store.enqueue_many_rollouts(requests))
                done = await store.wait_for_rollouts(rollout_ids=list(pending), timeout=0.05)
                pending.difference_update(r.rollout_id for r in done)

    ray_init_s = None
    strategy_spec: Any = strategy
    if strategy == "ray":
        import ray

        ray_started = time.perf_counter()
        ray.init(
            num_cpus=os.cpu_count(),
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            logging_level="WARNING",
        )
        ray_init_s = time.perf_counter() - ray_started
        strategy_spec = {
            "type": "ray",
            "n_runners": n_runners,
            "runner_resources": {"CPU": (os.cpu_count() or 1) / max(1, n_runners)},
            "server_host": "127.0.0.1",
        }
    algorithm: Any = (
        Drain()
        if algorithm_name == "drain"
        else agl.Baseline(max_queue_length=queue, span_verbosity="none", polling_interval=0.05)
    )
    trainer = agl.Trainer(
        n_runners=n_runners,
        strategy=strategy_spec,
        port=0 if strategy != "ray" else None,
        algorithm=algorithm,
        initial_resources={"prompt_template": PromptTemplate(template="{x}", engine="f-string")},
        progress=progress,
    )
    for module in _WARM_MODULES:  # one-time imports are not per-rollout work: load them before the clock
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    cpu_before = _cpu_seconds()
    started = time.perf_counter()
    trainer.fit(trivial_agent, list(range(n_rollouts)))
    wall = time.perf_counter() - started
    cpu = _cpu_seconds() - cpu_before
    result = {
        "strategy": strategy,
        "n_runners": n_runners,
        "algorithm": algorithm_name,
        "rollouts": n_rollouts,
        "wall_s": wall,
        "rollouts_per_s": n_rollouts / wall,
        "rollouts_per_cpu_s": n_rollouts / cpu if cpu > 0 and strategy != "ray" else None,
        "ray_init_s": ray_init_s,
        **asyncio.run(_measure_store(trainer.store, n_rollouts)),
    }
    print(json.dumps(result), flush=True)


def _median_result(runs: list[dict[str, Any]]) -> dict[str, Any]:
    merged = dict(runs[0])
    for key in ("wall_s", "rollouts_per_s", "steady_rollouts_per_s", "rollouts_per_cpu_s", "ray_init_s"):
        values = [r[key] for r in runs if r.get(key) is not None]
        merged[key] = round(statistics.median(values), 2) if values else None
    merged["worker_gap_ms"] = {
        k: round(statistics.median(r["worker_gap_ms"][k] for r in runs), 2) for k in ("p50", "p99", "max")
    }
    merged["runs"] = [round(r["rollouts_per_s"], 1) for r in runs]
    return merged


def _add_ray_overhead(results: list[dict[str, Any]]) -> None:
    """Per-rollout time ray adds over cs at the same runner count and algorithm (wall clock, medians)."""
    cs = {(r["algorithm"], r["n_runners"]): r for r in results if r["strategy"] == "cs"}
    for result in results:
        base = cs.get((result["algorithm"], result["n_runners"]))
        if result["strategy"] == "ray" and base is not None:
            extra = 1e3 / result["steady_rollouts_per_s"] - 1e3 / base["steady_rollouts_per_s"]
            result["ray_overhead_ms_per_rollout"] = round(extra, 3)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rollouts", type=int, default=4000)
    parser.add_argument("--runners", default="1,4,8")
    parser.add_argument("--strategies", "--strategy", default="shm,cs", help="comma-separated: shm,cs,ray")
    parser.add_argument("--algorithms", default="baseline,drain")
    parser.add_argument("--queue", type=int, default=256, help="Baseline max_queue_length")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--progress", action="store_true", help="keep the progress display on")
    parser.add_argument(
        "--one", nargs=3, metavar=("STRATEGY", "N_RUNNERS", "ALGORITHM"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.one:
        strategy, n_runners, algorithm = args.one
        run_one(strategy, int(n_runners), algorithm, args.rollouts, args.queue, args.progress)
        return
    results = []
    for algorithm in args.algorithms.split(","):
        for strategy in args.strategies.split(","):
            for n_runners in (int(n) for n in args.runners.split(",")):
                runs = []
                for _ in range(args.repeat):
                    command = [sys.executable, __file__, "--one", strategy, str(n_runners), algorithm]
                    command += ["--rollouts", str(args.rollouts), "--queue", str(args.queue)]
                    if args.progress:
                        command.append("--progress")
                    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
                    if done.returncode != 0:
                        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
                    runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
                results.append(_median_result(runs))
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    _add_ray_overhead(results)
    report = {
        "benchmark": "loop",
        "command": " ".join(["python", "bench/loop_bench.py", *sys.argv[1:]]),
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_1m_at_end": os.getloadavg()[0],
            "python": sys.version.split()[0],
        },
        "rollouts_per_configuration": args.rollouts,
        "results": results,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
