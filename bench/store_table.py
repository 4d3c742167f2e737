"""Every shared store side by side, in one run: `store_bench.py` per store and client layout.

Usage:
    python bench/store_table.py [--stores sqlite http postgres mongo] [--scale 0.1]

Runs `store_bench.py` for each client layout (one client; ``--clients 16``; ``--client-processes 8``)
and, within a layout, for each store right after the other, so the stores are compared under the same
machine load. ``http`` is ``agl store serve`` on a SQLite file; ``postgres`` a throwaway cluster
(agl-postgres), with ``fsync`` as ``AGL_BENCH_POSTGRES_FSYNC`` says (default off, the durability of the
SQLite stores' ``synchronous=NORMAL``); ``mongo`` agl-mongo on the nx-27017 emulator. The interpreter
needs every plugin measured installed (agl-postgres, agl-mongo[test]).

Prints JSON: the settings, every rate (ops/s; spans/s for add_many_spans) and a Markdown table; each
run's rates also go to stderr as one JSON line when it ends.
"""

from __future__ import annotations

import argparse
import json
import os
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


def run_bench(store: str, layout: str, scale: float) -> dict[str, Any]:
    """One `store_bench.py` run; its ``results`` (or the error)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "store_bench.py")
    command = [sys.executable, script, *STORE_ARGS[store], *LAYOUTS[layout], "--scale", str(scale)]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:] or ["failed"], "command": " ".join(command)}
    results = json.loads(done.stdout)["results"]
    rates = {op: value["rate"] for op, value in results.items()}
    took = round(time.monotonic() - started)
    print(
        json.dumps({"layout": layout, "store": store, "seconds": took, "rates": rates}),
        file=sys.stderr,
        flush=True,
    )
    return rates


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
    args = parser.parse_args()
    os.environ.setdefault("AGL_BENCH_POSTGRES_FSYNC", "off")
    fsync = os.environ["AGL_BENCH_POSTGRES_FSYNC"]
    durability = dict(DURABILITY)
    durability["postgres"] = (
        "fsync=off, synchronous_commit=on: each commit is written to the WAL before the call returns "
        "(a killed process loses nothing; an OS crash may)"
        if fsync == "off"
        else "fsync=on, synchronous_commit=on (PostgreSQL's defaults: survives an OS crash)"
    )
    rates: dict[str, dict[str, dict[str, Any]]] = {}
    for layout in args.layouts:
        rates[layout] = {store: run_bench(store, layout, args.scale) for store in args.stores}
    report = {
        "benchmark": "store_table",
        "scale": args.scale,
        "cpu_count": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "durability": {store: durability[store] for store in args.stores},
        "rates": rates,
        "table": markdown(rates, args.stores),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
