"""CPU instructions per store operation over HTTP, client and server apart, counted by valgrind.

Usage:
    python bench/http_instructions.py [--only OP ...] [--side client|server ...] [--count N]
        [--source DIR] [--compare DIR] [--keep DIR] [--jobs J]

`store_bench.py --store http` measures wall-clock rates, which on a shared 2-core machine swing by a
third between minutes. This counts the instructions (``valgrind --tool=callgrind``) that one operation
of `store_bench.py` costs the client process and the server process (``agl store serve --store
memory:``, on uvloop when installed, as the benchmark runs it), each measured with the other running
natively. Every count is two runs of a fresh server and client with the hash seed fixed: one that
only prepares the workload, one that prepares and does it; the result is ``(work - prepare) / count``.
For ``query_spans`` (one rollout of 20 spans read again and again) that is a revalidated read: the
client sends ``If-None-Match`` and the server answers ``304 Not Modified``. Only user-space work is
counted: the kernel's (system calls, page faults) shows in CPU times, not here.

``--keep DIR`` keeps the callgrind files (recorded with ``--dump-instr=no``) of both runs,
``DIR/<op>-<side>-<label>-{prepare,work}.out``; then
``python bench/http_instructions.py --diff PREPARE WORK --count N`` prints the instructions per unit
and C function that the work added (exclusive, largest first): which of aiohttp's parser, multidict,
pydantic-core, hashlib or the interpreter (Python code) they go to. ``--source`` / ``--compare``
measure the ``agl_core`` of other checkouts (put first on ``PYTHONPATH``), ``ratio`` = source / compare.

Prints JSON: per operation, side and source the instructions per unit (per span for
``add_many_spans``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from store_workload import OPERATION_COUNTS

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OPERATION_NAMES = tuple(OPERATION_COUNTS)
SIDES = ("client", "server")
_COLLECTED = re.compile(r"Collected : (\d+)")
_START_TIMEOUT = 600.0  # a server under valgrind takes a minute or more to import and bind


def child(name: str, url: str, count: int, work: bool) -> None:
    """Prepare `name`'s workload through a client of `url`, and do the work if `work`."""
    sys.path.insert(0, HERE)
    import store_bench  # here, after the path is set: the child's PYTHONPATH picks the agl_core

    from agl_core.store import open_store

    operation = next(op for op in store_bench.OPERATIONS if op.name == name)

    async def main() -> None:
        store = open_store(url)
        try:
            payloads = await operation.prepare(store, count, 1)
            built = operation.build(payloads[0])
            await store.get_latest_resources()  # the connection is open before the work
            gc.collect()
            if work:
                done = await operation.work(store, built)
                if done != count:
                    raise RuntimeError(f"{name} did {done} units of {count}")
        finally:
            await store.close()

    asyncio.run(main())


def _valgrind(out_file: str) -> list[str]:
    return ["valgrind", "--tool=callgrind", "--dump-instr=no", f"--callgrind-out-file={out_file}"]


def instructions(source: str, name: str, side: str, count: int, work: bool, out_file: str) -> int:
    """Instructions of `side`'s process for one run (`work` or prepare only), `source` on PYTHONPATH.

    Both processes run in `source` (``python -m`` puts the working directory first on the path).
    """
    import store_bench  # the driver's own agl_core; only its helpers are used here

    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=source)
    port = store_bench.free_port()
    url = f"http://127.0.0.1:{port}"
    server_command = [sys.executable, "-m", "agl_core.cli", "store", "serve", "--store", "memory:"]
    server_command += ["--port", str(port)]
    client_command = [sys.executable, os.path.abspath(__file__), "--child", name, url, str(count)]
    client_command.append("1" if work else "0")
    if side == "server":
        server_command = _valgrind(out_file) + server_command
    else:
        client_command = _valgrind(out_file) + client_command
    with tempfile.TemporaryFile("w+") as server_log:
        server = subprocess.Popen(
            server_command, env=env, cwd=source, stdout=subprocess.DEVNULL, stderr=server_log, text=True
        )
        try:
            store_bench.wait_for_health(url + "/v1/agl/health", server, _START_TIMEOUT)
            done = subprocess.run(
                client_command, capture_output=True, text=True, env=env, cwd=source, timeout=7200, check=False
            )
            if done.returncode != 0:
                raise RuntimeError(f"the client failed ({' '.join(client_command)}):\n{done.stderr[-3000:]}")
        finally:
            server.send_signal(signal.SIGTERM)  # graceful: valgrind writes its totals at exit
            try:
                server.wait(timeout=600)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        server_log.seek(0)
        report = server_log.read() if side == "server" else done.stderr
    found = _COLLECTED.search(report)
    if found is None:
        raise RuntimeError(f"no valgrind total for the {side} of {name}:\n{report[-3000:]}")
    return int(found.group(1))


def per_unit(source: str, name: str, side: str, count: int, keep: str | None, label: str) -> float:
    """Instructions per unit of work of `name` on `side` (the prepare-only run subtracted)."""
    scratch = tempfile.mkdtemp(prefix="agl-http-instructions-")
    try:
        kept = os.path.join(keep or scratch, f"{name}-{side}-{label}")
        prepared = instructions(source, name, side, count, False, kept + "-prepare.out")
        worked = instructions(source, name, side, count, True, kept + "-work.out")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return (worked - prepared) / count


_ANNOTATED = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(.+?)\s*$")


def exclusive_costs(path: str) -> dict[str, int]:
    """Exclusive instructions per ``file:function [object]`` of one callgrind file."""
    done = subprocess.run(
        ["callgrind_annotate", "--inclusive=no", "--threshold=100", path],
        capture_output=True,
        text=True,
        check=True,
    )
    costs: dict[str, int] = {}
    for line in done.stdout.splitlines():
        found = _ANNOTATED.match(line)
        if found and ":" in found.group(2) and "PROGRAM TOTALS" not in line:
            name = found.group(2)
            costs[name] = costs.get(name, 0) + int(found.group(1).replace(",", ""))
    return costs


def diff(prepare: str, work: str, count: int, top: int) -> None:
    """Print the C functions whose exclusive instructions the work added, per unit, largest first."""
    before, after = exclusive_costs(prepare), exclusive_costs(work)
    added = {
        name: (after.get(name, 0) - before.get(name, 0)) / count for name in after.keys() | before.keys()
    }
    by_object: dict[str, float] = {}
    for name, value in added.items():
        owner = name.rsplit("[", 1)[-1].rstrip("]") if name.endswith("]") else "?"
        by_object[os.path.basename(owner)] = by_object.get(os.path.basename(owner), 0.0) + value
    print("per object:")
    for owner, value in sorted(by_object.items(), key=lambda item: -item[1])[:top]:
        print(f"{value:12.0f}  {owner}")
    print("per function:")
    for name, value in sorted(added.items(), key=lambda item: -item[1])[:top]:
        print(f"{value:12.0f}  {name[-150:]}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="+", choices=OPERATION_NAMES, default=["query_spans"])
    parser.add_argument("--side", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument("--count", type=int, default=1000, help="units per operation (x5 for span adds)")
    parser.add_argument("--source", default=ROOT, help="checkout whose agl_core is measured (default: this)")
    parser.add_argument("--compare", help="a second checkout to measure; adds ratio = source / compare")
    parser.add_argument("--keep", help="keep the callgrind files of the working runs in this folder")
    parser.add_argument("--jobs", type=int, default=1, help="measurements at a time")
    parser.add_argument("--diff", nargs=2, metavar=("PREPARE", "WORK"), help="see the module docstring")
    parser.add_argument("--top", type=int, default=40, help="--diff: rows to print")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.diff:
        diff(args.diff[0], args.diff[1], args.count, args.top)
        return
    if args.child:
        name, url, count, work = args.child
        child(name, url, int(count), work == "1")
        return
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed; install it (Debian: apt-get install valgrind)")
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    sources = {"source": os.path.abspath(args.source)}
    if args.compare:
        sources["compare"] = os.path.abspath(args.compare)
    counts = {
        name: args.count * 5 if name in ("add_span", "add_many_spans") else args.count for name in args.only
    }
    jobs = [(label, name, side) for name in args.only for side in args.side for label in sources]

    def run_job(job: tuple[str, str, str]) -> float:
        label, name, side = job
        return per_unit(sources[label], name, side, counts[name], args.keep, label)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        values = list(pool.map(run_job, jobs))
    results: dict[str, dict[str, Any]] = {name: {"count": counts[name]} for name in args.only}
    for (label, name, side), value in zip(jobs, values, strict=True):
        results[name][f"{side}_{label}_instructions_per_unit"] = round(value)
    if args.compare:
        for row in results.values():
            for side in args.side:
                row[f"{side}_ratio"] = round(
                    row[f"{side}_source_instructions_per_unit"]
                    / row[f"{side}_compare_instructions_per_unit"],
                    3,
                )
    report = {"benchmark": "http_instructions", "server_store": "memory:", "python": sys.version.split()[0]}
    print(json.dumps({**report, "sources": sources, "results": results}, indent=2))


if __name__ == "__main__":
    main()
