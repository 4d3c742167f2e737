"""CPU instructions per hot in-memory store operation, counted by valgrind: a comparison noise cannot move.

Usage:
    python bench/store_instructions.py [--only OP ...] [--count N] [--source DIR] [--compare DIR]
        [--jobs J]

Wall-clock rates on a shared 2-core machine swing by up to 2x between runs of unchanged code, which
hides a 10-30% change. This counts the instructions (``valgrind --tool=callgrind``, Debian's
``valgrind``) that each operation of `store_bench.py` takes on a fresh ``memory:`` store: the same
workloads (``store_bench.OPERATIONS``), run twice in a child process -- once preparing only, once
preparing and then doing the work -- and reports ``(work - prepare) / units``. The count is the same
from run to run (hash seed fixed) whatever else the machine does; it is not a time (a cache miss costs
no more than a hit), so read it next to `store_bench.py`'s rates, not instead of them.

``--source DIR`` measures the ``agl_core`` of another checkout (for example a worktree of an older
commit, put first on ``PYTHONPATH``); ``--compare DIR`` measures a second one too and adds
``ratio`` = source / compare per operation. Each count runs Python under valgrind (about 30 s per
child), ``--jobs`` of them at a time.

One more workload, ``rollout_life``, follows a rollout from its claim to its first read, as a
training loop does, because a store may move work between writes and reads (the in-memory store builds
a span's object on its first read): per claimed rollout, ``add_many_spans`` of 10 spans,
``update_attempt(status="succeeded")``, ``get_rollout_by_id`` and ``query_spans`` (the first read).

Prints JSON: per operation and source the instructions per unit (per span for ``add_many_spans``, per
rollout for ``rollout_life``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from store_workload import OPERATION_COUNTS

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OPERATION_NAMES = (*OPERATION_COUNTS, "rollout_life")
SPAN_OPERATIONS = ("add_span", "add_many_spans")
LIFE_SPANS = 10  # spans per rollout in ``rollout_life``
_COLLECTED = re.compile(r"Collected : (\d+)")


def child(name: str, count: int, work: bool) -> None:
    """Prepare `name`'s workload on a fresh memory store, and do the work if `work`."""
    sys.path.insert(0, HERE)
    import store_bench  # here, after the path is set: the child's PYTHONPATH picks the agl_core

    from agl_core.store import LightningStore, open_store

    async def life_prepare(store: LightningStore, count: int, clients: int) -> list[Any]:
        started = await store_bench.start_many(store, count, worker="bench-worker")
        return [[(target, store_bench.make_spans([target], LIFE_SPANS)) for target in started]]

    async def life_work(store: LightningStore, lives: list[Any]) -> int:
        for (rollout_id, attempt_id), spans in lives:
            await store.add_many_spans(spans)
            await store.update_attempt(rollout_id, attempt_id, status="succeeded")
            await store.get_rollout_by_id(rollout_id)
            if len(await store.query_spans(rollout_id)) != LIFE_SPANS:
                raise RuntimeError(f"rollout {rollout_id} lost spans")
        return len(lives)

    life = store_bench.Operation("rollout_life", "rollouts/s", life_prepare, store_bench.identity, life_work)
    operation = next((op for op in store_bench.OPERATIONS if op.name == name), life)

    async def main() -> None:
        store = open_store("memory:")
        payloads = await operation.prepare(store, count, 1)
        built = operation.build(payloads[0])
        gc.collect()
        if work:
            done = await operation.work(store, built)
            if done != count:
                raise RuntimeError(f"{name} did {done} units of {count}")

    asyncio.run(main())


def instructions(source: str, name: str, count: int, work: bool) -> int:
    """Instructions the child process runs, under valgrind, with `source` first on PYTHONPATH."""
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=source)
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable]
    command += [os.path.abspath(__file__), "--child", name, str(count), "1" if work else "0"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600, check=False)
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"valgrind run failed ({' '.join(command)}):\n{done.stderr[-2000:]}")
    return int(found.group(1))


def per_unit(source: str, name: str, count: int) -> float:
    """Instructions per unit of work of `name` (the prepare-only run subtracted)."""
    return (instructions(source, name, count, True) - instructions(source, name, count, False)) / count


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="+", choices=OPERATION_NAMES, default=list(OPERATION_NAMES))
    parser.add_argument("--count", type=int, default=2000, help="units per operation (x2.5 for span adds)")
    parser.add_argument("--source", default=ROOT, help="checkout whose agl_core is measured (default: this)")
    parser.add_argument("--compare", help="a second checkout to measure; adds ratio = source / compare")
    parser.add_argument("--jobs", type=int, default=2, help="valgrind runs at a time")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        name, count, work = args.child
        child(name, int(count), work == "1")
        return
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed; install it (Debian: apt-get install valgrind)")
    sources = {"source": os.path.abspath(args.source)}
    if args.compare:
        sources["compare"] = os.path.abspath(args.compare)
    counts = {name: args.count * 5 // 2 if name in SPAN_OPERATIONS else args.count for name in args.only}
    jobs = [(label, name) for name in args.only for label in sources]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        values = list(pool.map(lambda job: per_unit(sources[job[0]], job[1], counts[job[1]]), jobs))
    results: dict[str, dict[str, Any]] = {name: {"count": counts[name]} for name in args.only}
    for (label, name), value in zip(jobs, values, strict=True):
        results[name][f"{label}_instructions_per_unit"] = round(value)
    if args.compare:
        for row in results.values():
            row["ratio"] = round(
                row["source_instructions_per_unit"] / row["compare_instructions_per_unit"], 3
            )
    report = {"benchmark": "store_instructions", "store": "memory", "python": sys.version.split()[0]}
    print(json.dumps({**report, "sources": sources, "results": results}, indent=2))


if __name__ == "__main__":
    main()
