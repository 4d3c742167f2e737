"""Cold import cost of agl_core: wall time and peak RSS, measured in fresh interpreters.

Usage: python bench/import_bench.py [--runs N]
Prints JSON. Each scenario runs in a new process; the median of N runs is reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

SCENARIOS = {
    "import agl_core": "import agl_core",
    "import agl_core + types": "import agl_core; agl_core.Rollout",
    "import agl_core + plugin manager": "import agl_core; agl_core.get_plugin_manager()",
    "python baseline": "pass",
}

CHILD = """
import resource, time
t0 = time.perf_counter()
{code}
elapsed = time.perf_counter() - t0
rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(elapsed, rss_kb)
"""


def measure(code: str, runs: int) -> dict[str, float]:
    times, rss = [], []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", CHILD.format(code=code)], capture_output=True, text=True, check=True
        ).stdout.split()
        times.append(float(out[0]))
        rss.append(int(out[1]) / 1024)
    return {
        "seconds_median": round(statistics.median(times), 4),
        "rss_mb_median": round(statistics.median(rss), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    results = {name: measure(code, args.runs) for name, code in SCENARIOS.items()}
    print(json.dumps({"benchmark": "import", "runs": args.runs, "results": results}, indent=2))


if __name__ == "__main__":
    main()
