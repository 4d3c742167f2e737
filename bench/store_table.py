"""Every shared store side by side, in one run: `store_bench.py` per store and client layout.

Usage:
    python bench/store_table.py [--stores sqlite http postgres mongo] [--scale 0.1]
        [--layouts "8 processes" ...] [--only enqueue_rollout ...] [--rounds 5]

Runs `store_bench.py` for each client layout (one client; ``--clients 16``; ``--client-processes 8``)
and, within a layout, for each store right after the other, so the stores are compared under the same
machine load. ``--rounds N`` repeats that alternation N times (store A, store B, A, B, ...) and reports
every run and the median per store, so the machine's noise is visible next to the difference.

``http`` is ``agl store serve`` on a SQLite file; ``postgres`` a throwaway cluster
(agl-postgres), with ``fsync`` as ``AGL_BENCH_POSTGRES_FSYNC`` says (default off, the durability of the
SQLite stores' ``synchronous=NORMAL``); ``mongo`` agl-mongo on the nx-27017 emulator. The interpreter
needs every plugin measured installed (agl-postgres, agl-mongo[test]).

Prints JSON: the settings, every rate (ops/s; spans/s for add_many_spans; the median over the rounds),
each round's rates (``runs``) and a Markdown table of the medians; each run's rates also go to stderr as
one JSON line when it ends.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

LAYOUTS: dict[str, list[str]] = {
    "1 client": [],
    "16 clients": ["--clients", "16"],
    "8 processes": ["--client-processes", "8"],
}
"""Client layouts: the label and the `store_bench.py` arguments."""

STORE_ARGS: dict[str, list[str]] = {
    "sqlite": ["--store", "sqlite"],
    "http": ["--store", "http", "--server-store", "sqlite"],
    "postgres": ["--store", "postgres"],
    "mongo": ["--store", "mongo"],
}
"""Stores: the label and the `store_bench.py` arguments."""

DURABILITY: dict[str, str] = {
    "sqlite": "WAL, synchronous=NORMAL (a killed process loses nothing; an OS crash may lose commits)",
    "http": "agl store serve on SQLite: the same",
    "mongo": "nx-27017 over SQLite (its defaults)",
}
"""What a commit survives, per store (postgres is filled in from the fsync setting)."""


def run_bench(store: str, layout: str, scale: float, only: list[str] | None) -> dict[str, Any]:
    """One `store_bench.py` run; its ``results`` (or the error)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "store_bench.py")
    command = [sys.executable, script, *STORE_ARGS[store], *LAYOUTS[layout], "--scale", str(scale)]
    if only:
        command += ["--only", *only]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:] or ["failed"], "command": " ".join(command)}
    results = json.loads(done.stdout)["results"]
    rates = {op: value["rate"] for op, value in results.items()}
    took = round(time.monotonic() - started)
    print(
        json.dumps(
            {"layout": layout, "store": store, "seconds": took, "load": os.getloadavg()[0], "rates": rates}
        ),
        file=sys.stderr,
        flush=True,
    )
    return rates


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per operation, the median rate of the runs that measured it (a failed run is left out)."""
    operations = {op for run in runs for op in run if op not in ("error", "command")}
    found = {op: [run[op] for run in runs if op in run] for op in operations}
    if not found:
        return runs[-1]
    return {op: statistics.median(values) for op, values in found.items()}


def markdown(rates: dict[str, dict[str, dict[str, Any]]], stores: list[str]) -> str:
    """The rates as a Markdown table: one row per operation and layout, one column per store."""
    lines = ["| operation | clients | " + " | ".join(stores) + " |", "|---|---|" + "---|" * len(stores)]
    operations: list[str] = []
    for by_store in rates.values():
        for result in by_store.values():
            operations.extend(op for op in result if op not in ("error", "command") and op not in operations)
    for op in operations:
        for layout, by_store in rates.items():
            cells = []
            for store in stores:
                value = by_store.get(store, {}).get(op)
                cells.append("error" if value is None else f"{value:,.0f}")
            lines.append(f"| `{op}` | {layout} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stores", nargs="*", default=list(STORE_ARGS), choices=list(STORE_ARGS))
    parser.add_argument("--layouts", nargs="*", default=list(LAYOUTS), choices=list(LAYOUTS))
    parser.add_argument("--scale", type=float, default=0.1, help="multiply every operation count")
    parser.add_argument("--only", nargs="*", help="measure only these operations (store_bench.py --only)")
    parser.add_argument(
        "--rounds", type=int, default=1, help="alternate the stores this many times; report each and medians"
    )
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    os.environ.setdefault("AGL_BENCH_POSTGRES_FSYNC", "off")
    fsync = os.environ["AGL_BENCH_POSTGRES_FSYNC"]
    durability = dict(DURABILITY)
    durability["postgres"] = (
        "fsync=off, synchronous_commit=on: each commit is written to the WAL before the call returns "
        "(a killed process loses nothing; an OS crash may)"
        if fsync == "off"
        else "fsync=on, synchronous_commit=on (PostgreSQL's defaults: survives an OS crash)"
    )
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for layout in args.layouts:
        runs[layout] = {store: [] for store in args.stores}
        for _ in range(args.rounds):
            for store in args.stores:
                runs[layout][store].append(run_bench(store, layout, args.scale, args.only))
    rates = {
        layout: {store: medians(store_runs) for store, store_runs in by_store.items()}
        for layout, by_store in runs.items()
    }
    report = {
        "benchmark": "store_table",
        "scale": args.scale,
        "rounds": args.rounds,
        "cpu_count": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "durability": {store: durability[store] for store in args.stores},
        "rates": rates,
        "runs": runs,
        "table": markdown(rates, args.stores),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
