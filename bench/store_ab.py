"""Two agl checkouts side by side with Agent Lightning 0.3.0, in alternating rounds, optionally under load.

Usage:
    python bench/store_ab.py --a DIR --b DIR [--peer-python PYTHON] [--store http] [--only OP ...]
        [--scale F] [--rounds N] [--load N]

The machine's speed drifts by a third between minutes, so a before/after comparison made minutes apart
says little. Each round runs `peer_store_bench.py` (0.3.0) once (with ``--peer-python``), then
`store_bench.py` with the ``agl_core`` of checkout A and of checkout B (first on ``PYTHONPATH``,
working directory there; the order flips every round), and records each one's rate and its ratio to
that round's 0.3 rate.
``--load N`` starts N busy-looping processes for the whole measurement (killed at the end): the
"machine under load" case.

Prints JSON: per operation the rates and ratios of every round and their medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


def agl_rate(source: str, args: argparse.Namespace, op: str) -> float:
    """`store_bench.py`'s rate for `op` with the ``agl_core`` of `source`."""
    command = [sys.executable, os.path.join(HERE, "store_bench.py"), "--store", args.store, "--only", op]
    command += ["--scale", str(args.scale)]
    env = dict(os.environ, PYTHONPATH=source)
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=source, timeout=1800, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"store_bench failed for {source}:\n{done.stderr[-2000:]}")
    return float(json.loads(done.stdout)["results"][op]["rate"])


def peer_rate(args: argparse.Namespace, op: str) -> float:
    """Agent Lightning 0.3.0's rate for `op`, measured now."""
    command = [args.peer_python, os.path.join(HERE, "peer_store_bench.py"), "--store", args.store]
    command += ["--only", op, "--scale", str(args.scale), "--repeat", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the peer benchmark failed:\n{done.stderr[-2000:]}")
    return float(json.loads(done.stdout)["results"][op]["rate"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--a", required=True, help="checkout (a folder holding agl_core) measured as A")
    parser.add_argument("--b", required=True, help="checkout measured as B")
    parser.add_argument("--peer-python", help="interpreter with agentlightning==0.3.0 (else no peer)")
    parser.add_argument("--store", default="http", choices=["http", "memory"])
    parser.add_argument("--only", nargs="+", default=["query_spans"])
    parser.add_argument("--scale", type=float, default=0.3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--load", type=int, default=0, help="busy-looping processes during the rounds")
    args = parser.parse_args()
    sources = {"a": os.path.abspath(args.a), "b": os.path.abspath(args.b)}
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(max(0, args.load))
    ]
    results: dict[str, Any] = {}
    try:
        for op in args.only:
            rounds: list[dict[str, float]] = []
            for index in range(args.rounds):
                row = {"peer_rate": peer_rate(args, op)} if args.peer_python else {}
                for label in ("a", "b") if index % 2 == 0 else ("b", "a"):
                    row[f"{label}_rate"] = agl_rate(sources[label], args, op)
                for label in ("a", "b"):
                    if args.peer_python:
                        row[f"{label}_ratio"] = round(row[f"{label}_rate"] / row["peer_rate"], 2)
                rounds.append(row)
                print(json.dumps({"op": op, "round": index, **row}), file=sys.stderr, flush=True)
            results[op] = {
                "rounds": rounds,
                "median": {key: round(statistics.median(r[key] for r in rounds), 2) for key in rounds[0]},
                "b_over_a": round(statistics.median(r["b_rate"] / r["a_rate"] for r in rounds), 3),
            }
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    report = {"benchmark": "store_ab", "store": args.store, "scale": args.scale, "load": args.load}
    print(json.dumps({**report, "sources": sources, "results": results}, indent=2))


if __name__ == "__main__":
    main()
