"""Time to first paint of the dashboard's rollouts view on a store holding 100k rollouts (SQLite).

Usage (needs Playwright and a Chromium binary, e.g. in the venv ``make test-dashboard`` builds):
    .venv-dashboard/bin/python bench/dashboard_bench.py [--rollouts 100000] [--repeat 5] [--db PATH]

Fills a SQLite store with ``--rollouts`` rollouts (with ``enqueue_many_rollouts``, half of them then
finished with a reward span each; reused when ``--db`` already holds them), serves it with
``agl store serve`` and opens ``/`` in a fresh headless Chromium tab ``--repeat`` times. Prints JSON with
the medians (milliseconds from navigation start) of ``first_contentful_paint`` (the browser's own
measure), ``rows_painted`` (the first page of the table, 50 rows, is in the DOM) and ``rewards_filled``
(their reward cells are filled in too), plus the bundle size of the dashboard's assets.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agl_core.dashboard import ASSETS_DIR
from agl_core.store import open_store
from agl_core.types import EnqueueRolloutRequest
from agl_testing.store_conformance import make_span


async def fill(path: Path, n: int) -> None:
    """``n`` rollouts; every second one is claimed, gets a reward span and succeeds."""
    store = open_store(f"sqlite:///{path}")
    try:
        have = (await store.statistics())["total_rollouts"]
        batch = 1000
        for start in range(have, n, batch):
            requests = [
                EnqueueRolloutRequest(input={"question": f"task {i}"}, mode="train")
                for i in range(start, min(n, start + batch))
            ]
            await store.enqueue_many_rollouts(requests)
            claimed = await store.dequeue_many_rollouts(limit=len(requests) // 2, worker_id="bench-worker")
            spans = [
                make_span(
                    c.rollout_id,
                    c.attempt.attempt_id,
                    1,
                    name="agentlightning.annotation",
                    start_time=time.time(),
                    attributes={
                        "agentlightning.reward.0.name": "primary",
                        "agentlightning.reward.0.value": 1.0,
                    },
                )
                for c in claimed
            ]
            await store.add_many_spans(spans)
            for c in claimed:
                await store.update_attempt(c.rollout_id, c.attempt.attempt_id, status="succeeded")
    finally:
        await store.close()


def bundle_bytes() -> int:
    """Bytes of every asset the browser loads (HTML, CSS, JS), uncompressed."""
    return sum(p.stat().st_size for p in ASSETS_DIR.rglob("*") if p.is_file())


def measure(url: str, repeat: int) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    executable = (
        os.environ.get("AGL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    )
    fcp: list[float] = []
    rows: list[float] = []
    complete: list[float] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        for _ in range(repeat):
            page = browser.new_page()
            page.goto(url + "/")
            page.wait_for_selector("#rollouts tbody tr:nth-child(50)", timeout=120_000)
            rows.append(page.evaluate("performance.now()"))
            page.wait_for_selector("#rollouts tbody[data-state=complete] tr:nth-child(50)", timeout=120_000)
            complete.append(page.evaluate("performance.now()"))
            fcp.append(
                page.evaluate(
                    "performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint')"
                    "?.startTime ?? -1"
                )
            )
            page.close()
        browser.close()
    return {
        "first_contentful_paint_ms": statistics.median(fcp),
        "rows_painted_ms": statistics.median(rows),
        "rewards_filled_ms": statistics.median(complete),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rollouts", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--db", type=Path, default=None, help="store file to fill (or reuse)")
    args = parser.parse_args()
    tmp = None
    if args.db is None:
        tmp = tempfile.TemporaryDirectory()
        args.db = Path(tmp.name) / "store.db"
    t0 = time.perf_counter()
    asyncio.run(fill(args.db, args.rollouts))
    fill_seconds = time.perf_counter() - t0
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agl_core.cli",
            "store",
            "serve",
            "--store",
            f"sqlite:///{args.db}",
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = None
        for line in proc.stdout:
            found = re.search(r"at (http://127\.0\.0\.1:\d+)", line)
            if found:
                url = found.group(1)
                break
        if url is None:
            raise SystemExit("agl store serve did not start")
        result = measure(url, args.repeat)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if tmp is not None:
            tmp.cleanup()
    print(
        json.dumps(
            {
                "bench": "dashboard_first_paint",
                "rollouts": args.rollouts,
                "repeat": args.repeat,
                **{k: round(v, 1) for k, v in result.items()},
                "bundle_bytes": bundle_bytes(),
                "fill_seconds": round(fill_seconds, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
