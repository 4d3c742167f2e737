"""Peak memory of ``agl store export`` as the store grows: streaming means it stays flat.

Usage:
    .venv/bin/python bench/export_bench.py [--spans 10000,100000,1000000] [--spans-per-rollout 10]
        [--adapter messages] [--dir PATH]

For each size, fills a SQLite store with ``size / spans-per-rollout`` succeeded rollouts, each with
``spans-per-rollout - 1`` LLM call spans (GenAI chat messages and token ids, about 1 kB of attributes) and a
reward span, then runs ``agl store export --format jsonl`` in a fresh interpreter and records its peak
resident memory (``ru_maxrss``). Stores are kept in ``--dir`` (default: a temporary folder) and reused when
they already hold the rollouts. Prints one JSON object: per size the spans, rollouts, records, output bytes,
export seconds and peak RSS in MiB, and ``rss_growth`` = peak RSS of the largest store / of the smallest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agl_core.store import open_store
from agl_core.testing.store_conformance import make_span
from agl_core.types import EnqueueRolloutRequest

BATCH = 500
"""Rollouts created, claimed and given spans per round while filling."""


def chat_spans(rollout_id: str, attempt_id: str, llm_calls: int) -> list[object]:
    """``llm_calls`` chat spans (messages, token ids) then a reward span, like a traced agent leaves."""
    spans = []
    for k in range(llm_calls):
        question = f"step {k} of {rollout_id}: " + "context " * 40
        messages_in = [{"role": "user", "parts": [{"type": "text", "content": question}]}]
        messages_out = [{"role": "assistant", "parts": [{"type": "text", "content": f"answer {k}"}]}]
        spans.append(
            make_span(
                rollout_id,
                attempt_id,
                k + 1,
                name="chat model",
                start_time=1000.0 + k,
                attributes={
                    "gen_ai.input.messages": json.dumps(messages_in),
                    "gen_ai.output.messages": json.dumps(messages_out),
                    "prompt_token_ids": list(range(32)),
                    "response_token_ids": list(range(8)),
                },
            )
        )
    spans.append(
        make_span(
            rollout_id,
            attempt_id,
            llm_calls + 1,
            name="agentlightning.annotation",
            start_time=1000.0 + llm_calls,
            attributes={"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": 1.0},
        )
    )
    return spans


async def fill(path: Path, rollouts: int, spans_per_rollout: int) -> None:
    """Grow the store at ``path`` to ``rollouts`` succeeded rollouts (reusing what it already holds)."""
    store = open_store(f"sqlite:///{path}")
    try:
        have = (await store.statistics())["total_rollouts"]
        for start in range(have, rollouts, BATCH):
            count = min(BATCH, rollouts - start)
            requests = [EnqueueRolloutRequest(input={"task": start + i}, mode="train") for i in range(count)]
            await store.enqueue_many_rollouts(requests)
            claimed = await store.dequeue_many_rollouts(limit=count, worker_id="bench-worker")
            spans = [
                span
                for c in claimed
                for span in chat_spans(c.rollout_id, c.attempt.attempt_id, spans_per_rollout - 1)
            ]
            await store.add_many_spans(spans)  # type: ignore[arg-type]
            for c in claimed:
                await store.update_attempt(c.rollout_id, c.attempt.attempt_id, status="succeeded")
    finally:
        await store.close()


def child(db: Path, out: Path, adapter: str) -> None:
    """Run the export in this interpreter and print its peak RSS (MiB) and duration as JSON."""
    from click.testing import CliRunner

    from agl_core.cli import build_cli
    from agl_core.plugins import PluginManager

    cli = build_cli(PluginManager(strict=False))
    t0 = time.perf_counter()
    result = CliRunner().invoke(
        cli,
        ["store", "export", "--store", f"sqlite:///{db}", "--adapter", adapter, "--restart", str(out)],
        catch_exceptions=False,
    )
    seconds = time.perf_counter() - t0
    if result.exit_code != 0:
        raise SystemExit(f"export failed: {result.output}")
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_rss_mib": round(peak_kib / 1024, 1), "export_seconds": round(seconds, 1)}))


def measure(db: Path, out: Path, adapter: str) -> dict[str, float]:
    """The child's figures, from a fresh interpreter (so one size's peak does not hide the next's)."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(db), str(out), "--adapter", adapter],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", default="10000,100000,1000000", help="comma-separated store sizes")
    parser.add_argument("--spans-per-rollout", type=int, default=10)
    parser.add_argument("--adapter", choices=["messages", "triplets"], default="messages")
    parser.add_argument("--dir", type=Path, default=None, help="folder for the stores (kept, reused)")
    parser.add_argument("--child", nargs=2, type=Path, metavar=("DB", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.adapter)
        return
    tmp = None
    if args.dir is None:
        tmp = tempfile.TemporaryDirectory()
        args.dir = Path(tmp.name)
    args.dir.mkdir(parents=True, exist_ok=True)
    sizes = sorted(int(s) for s in args.spans.split(","))
    results = []
    try:
        for spans in sizes:
            rollouts = spans // args.spans_per_rollout
            db = args.dir / f"export-{rollouts}x{args.spans_per_rollout}.db"
            t0 = time.perf_counter()
            asyncio.run(fill(db, rollouts, args.spans_per_rollout))
            fill_seconds = time.perf_counter() - t0
            out = args.dir / f"export-{rollouts}.jsonl"
            figures = measure(db, out, args.adapter)
            with out.open("rb") as f:
                records = sum(1 for _ in f)
            results.append(
                {
                    "spans": spans,
                    "rollouts": rollouts,
                    "records": records,
                    "out_bytes": out.stat().st_size,
                    "fill_seconds": round(fill_seconds, 1),
                    **figures,
                }
            )
            out.unlink()
            out.with_name(out.name + ".progress.json").unlink()
    finally:
        if tmp is not None:
            tmp.cleanup()
    print(
        json.dumps(
            {
                "bench": "store_export_memory",
                "adapter": args.adapter,
                "spans_per_rollout": args.spans_per_rollout,
                "sizes": results,
                "rss_growth": round(results[-1]["peak_rss_mib"] / results[0]["peak_rss_mib"], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
