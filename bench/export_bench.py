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

``--window N`` exports only the first and the last N rollouts of a store holding more than 2N (each
window in a fresh interpreter, through the command's own streaming loop, `export_records`): its peak RSS
on the full-size store at both ends and its speed there, from which the whole export's time is estimated.
Filling uses public store calls only, sized for speed: 2,000 rollouts per
enqueue/dequeue/``add_many_spans`` round, spans copied from validated templates, concurrent updates.
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
from agl_core.types import EnqueueRolloutRequest, Span
from agl_testing.store_conformance import make_span

BATCH = 2000
"""Rollouts created, claimed and given spans per round while filling (one ``add_many_spans`` call)."""
CONCURRENT_UPDATES = 500
"""``update_attempt`` calls in flight at once while finishing a round (the store groups their commits)."""


def _messages_in(rollout_id: str, k: int) -> str:
    question = f"step {k} of {rollout_id}: " + "context " * 40
    return json.dumps([{"role": "user", "parts": [{"type": "text", "content": question}]}])


def chat_spans(rollout_id: str, attempt_id: str, llm_calls: int) -> list[Span]:
    """``llm_calls`` chat spans (messages, token ids) then a reward span, like a traced agent leaves."""
    spans = []
    for k in range(llm_calls):
        messages_out = [{"role": "assistant", "parts": [{"type": "text", "content": f"answer {k}"}]}]
        spans.append(
            make_span(
                rollout_id,
                attempt_id,
                k + 1,
                name="chat model",
                start_time=1000.0 + k,
                attributes={
                    "gen_ai.input.messages": _messages_in(rollout_id, k),
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


def copy_spans(templates: list[Span], rollout_id: str, attempt_id: str) -> list[Span]:
    """`chat_spans` of another rollout, copied from `templates` (validated once, not once per span)."""
    spans = []
    for k, template in enumerate(templates):
        update: dict[str, object] = {"rollout_id": rollout_id, "attempt_id": attempt_id}
        if k < len(templates) - 1:  # a chat span: its question names the rollout
            update["attributes"] = {
                **template.attributes,
                "gen_ai.input.messages": _messages_in(rollout_id, k),
            }
        spans.append(template.model_copy(update=update))
    return spans


async def fill(path: Path, rollouts: int, spans_per_rollout: int) -> None:
    """Grow the store at ``path`` to ``rollouts`` succeeded rollouts (reusing what it already holds).

    Only public store calls, sized for speed: `BATCH` rollouts per enqueue, dequeue and ``add_many_spans``
    call, spans copied from validated templates, `CONCURRENT_UPDATES` ``update_attempt`` calls at once.
    """
    store = open_store(f"sqlite:///{path}")
    templates = chat_spans("ro-template", "at-template", spans_per_rollout - 1)
    try:
        have = (await store.statistics())["total_rollouts"]
        for start in range(have, rollouts, BATCH):
            count = min(BATCH, rollouts - start)
            requests = [EnqueueRolloutRequest(input={"task": start + i}, mode="train") for i in range(count)]
            await store.enqueue_many_rollouts(requests)
            claimed = await store.dequeue_many_rollouts(limit=count, worker_id="bench-worker")
            spans = [s for c in claimed for s in copy_spans(templates, c.rollout_id, c.attempt.attempt_id)]
            await store.add_many_spans(spans)
            for first in range(0, len(claimed), CONCURRENT_UPDATES):
                await asyncio.gather(
                    *(
                        store.update_attempt(c.rollout_id, c.attempt.attempt_id, status="succeeded")
                        for c in claimed[first : first + CONCURRENT_UPDATES]
                    )
                )
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


class _WindowDone(Exception):
    pass


def child_window(db: Path, out: Path, adapter: str, start: int, count: int) -> None:
    """Export rollouts ``start`` to ``start + count`` with the command's own streaming loop; print figures.

    `export_records` is what ``agl store export`` runs (it resumes at ``start`` the same way); the command
    line is built first so the interpreter holds what the full command's does.
    """
    from agl_core.cli import build_cli
    from agl_core.cli.store_export_cmd import JsonlWriter, export_records
    from agl_core.plugins import PluginManager

    build_cli(PluginManager(strict=False))

    def stop_after(reached: int, total: int) -> None:
        if reached >= start + count:
            raise _WindowDone

    writer = JsonlWriter(out, None)
    t0 = time.perf_counter()
    try:
        asyncio.run(
            export_records(
                f"sqlite:///{db}",
                writer,
                adapter=adapter,
                statuses=["succeeded"],
                min_reward=None,
                start=start,
                save=lambda next_index, position: None,
                on_rollout=stop_after,
            )
        )
    except _WindowDone:
        pass
    finally:
        writer.close()
    seconds = time.perf_counter() - t0
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_rss_mib": round(peak_kib / 1024, 1), "export_seconds": round(seconds, 1)}))


def measure(db: Path, out: Path, adapter: str, window: tuple[int, int] | None = None) -> dict[str, float]:
    """The child's figures, from a fresh interpreter (so one size's peak does not hide the next's)."""
    extra = [] if window is None else ["--child-window", str(window[0]), str(window[1])]
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(db), str(out), "--adapter", adapter, *extra],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_windows(db: Path, out: Path, adapter: str, rollouts: int, window: int) -> dict[str, object]:
    """Peak RSS and speed exporting the first and the last `window` rollouts; the whole export estimated."""
    figures: dict[str, object] = {}
    rates = []
    for name, start in (("head", 0), ("tail", rollouts - window)):
        found = measure(db, out, adapter, (start, window))
        with out.open("rb") as f:
            found["records"] = sum(1 for _ in f)
        found["rollouts_per_second"] = round(window / max(found["export_seconds"], 1e-9), 1)
        rates.append(window / max(found["export_seconds"], 1e-9))
        figures[f"{name}_window"] = {"first_rollout": start, "rollouts": window, **found}
    figures["peak_rss_mib"] = max(w["peak_rss_mib"] for w in figures.values())  # type: ignore[index]
    figures["export_seconds_estimate"] = round(rollouts / (sum(rates) / len(rates)), 1)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", default="10000,100000,1000000", help="comma-separated store sizes")
    parser.add_argument("--spans-per-rollout", type=int, default=10)
    parser.add_argument("--adapter", choices=["messages", "triplets"], default="messages")
    parser.add_argument("--dir", type=Path, default=None, help="folder for the stores (kept, reused)")
    parser.add_argument(
        "--window",
        type=int,
        default=0,
        help="for stores of more than 2*N rollouts export only the first and the last N (0: everything)",
    )
    parser.add_argument("--child", nargs=2, type=Path, metavar=("DB", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--child-window", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.child_window:
            child_window(args.child[0], args.child[1], args.adapter, *args.child_window)
        else:
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
            print(json.dumps({"filled": spans, "fill_seconds": round(fill_seconds, 1)}), file=sys.stderr)
            out = args.dir / f"export-{rollouts}.jsonl"
            if args.window and rollouts > 2 * args.window:
                results.append(
                    {
                        "spans": spans,
                        "rollouts": rollouts,
                        "fill_seconds": round(fill_seconds, 1),
                        **measure_windows(db, out, args.adapter, rollouts, args.window),
                    }
                )
                out.unlink()
                continue
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
