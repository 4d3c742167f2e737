"""How long ``agl --help`` takes: CPU and wall seconds per run, averaged, next to a bare interpreter.

Usage: python tools/help_time.py [VENV_BIN] [RUNS]. CPU time is the figure to compare on a shared machine
(wall time there mostly measures the other jobs); issue 39's goal is 0.2 s of wall time on a quiet one.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path


def per_run(command: list[str], runs: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) per run of ``command``, children's CPU included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    for _ in range(runs):
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=60)
    wall = (time.perf_counter() - started) / runs
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / runs
    return cpu, wall


def main(argv: list[str]) -> int:
    """Print the figures for a bare interpreter, ``import click`` and ``agl --help``."""
    bin_dir = Path(argv[0]) if argv else Path(sys.executable).parent
    runs = int(argv[1]) if len(argv) > 1 else 10
    python = str(bin_dir / "python")
    for label, command in (
        ("python -c pass", [python, "-c", "pass"]),
        ("python -c 'import click'", [python, "-c", "import click"]),
        ("agl --help", [str(bin_dir / "agl"), "--help"]),
    ):
        cpu, wall = per_run(command, runs)
        print(f"{label:28} cpu {cpu:.3f} s  wall {wall:.3f} s  ({runs} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
