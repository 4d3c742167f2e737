"""Rollout lifecycles per second: the store's speed gate, side by side with Agent Lightning 0.3.0.

Usage:
    python bench/rollout_life.py [--peer-python PYTHON] [--baseline CHECKOUT] [--rounds R]
        [--seconds S] [--only CASE ...]

One lifecycle is what a training loop asks of the store for one rollout: ``enqueue_rollout`` ->
``dequeue_rollout`` (a runner claims it) -> ``add_many_spans`` of six realistic spans (two LLM calls
with a few KB of messages and their token ids, a tool call, an agent span, a reward, a root) ->
``update_attempt(status="succeeded")`` -> ``query_spans`` of the rollout once (the algorithm reads it).
Each client runs lifecycles back to back for ``--seconds``; the rate is lifecycles done by all clients
over the wall time from the first start to the last end.

Cases: ``memory`` and ``sqlite`` (one client in the process that holds the store), ``http-memory``
and ``http-sqlite`` (``agl store serve`` in its own process over that store) with 1 and 4 client
processes. Agent Lightning 0.3.0 has no SQLite store, so the SQLite cases are compared with its
in-memory store (in process, or behind its HTTP server).

``--peer-python PYTHON`` (an interpreter with ``agentlightning==0.3.0``, e.g. ``.venv-peer/bin/python``)
measures the same case on Agent Lightning in alternating rounds (agl first in odd rounds, the peer
first in even ones), since this machine's speed drifts from minute to minute. Every round runs in
fresh processes on a fresh store. ``--baseline CHECKOUT`` adds a third system in the same rounds: the
``agl_core`` of another checkout (e.g. ``git worktree add --detach /tmp/before main``), run by this
interpreter with that checkout first on ``PYTHONPATH`` -- a before/after comparison on one machine at
one moment. Prints one JSON document: per case the median rate of each system and the medians of the
per-round ratios ``agl/before`` and ``agl/peer``.

The same file runs both systems: ``--one`` measures a single round of one case with the interpreter it
was started by (agl, or Agent Lightning with ``--system peer``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

CASES: dict[str, tuple[str, int]] = {
    "memory": ("memory", 1),
    "sqlite": ("sqlite", 1),
    "http-memory-1": ("http-memory", 1),
    "http-memory-4": ("http-memory", 4),
    "http-sqlite-1": ("http-sqlite", 1),
    "http-sqlite-4": ("http-sqlite", 4),
}
"""Case name -> (store kind, client processes)."""

PEER_KIND = {"memory": "memory", "sqlite": "memory", "http-memory": "http", "http-sqlite": "http"}
"""The Agent Lightning 0.3.0 store each kind is compared with (it has no SQLite store)."""

SPANS_PER_ROLLOUT = 6


def _messages(turns: int, words: int) -> list[dict[str, str]]:
    text = " ".join(f"word{i % 97}" for i in range(words))
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": text} for i in range(turns)]


def span_templates() -> list[dict[str, Any]]:
    """The six spans of one rollout as ``Span.from_attributes`` keyword arguments (both systems).

    The two LLM calls carry about 3 KB of prompt and 1 KB of completion each, with 600 prompt and
    150 completion token ids, as the LLM proxy records them.
    """
    templates: list[dict[str, Any]] = []
    for call in range(2):
        attributes: dict[str, Any] = {
            "gen_ai.system": "openai",
            "gen_ai.request.model": "bench-model",
            "gen_ai.usage.prompt_tokens": 600,
            "gen_ai.usage.completion_tokens": 150,
            "prompt_token_ids": list(range(1000 + call, 1600 + call)),
            "response_token_ids": list(range(2000 + call, 2150 + call)),
        }
        for index, message in enumerate(_messages(4, 90)):
            attributes[f"gen_ai.prompt.{index}.role"] = message["role"]
            attributes[f"gen_ai.prompt.{index}.content"] = message["content"]
        attributes["gen_ai.completion.0.role"] = "assistant"
        attributes["gen_ai.completion.0.content"] = " ".join(f"answer{i}" for i in range(120))
        templates.append({"name": "openai.chat.completion", "attributes": attributes})
    templates.append(
        {
            "name": "tool.call",
            "attributes": {"tool.name": "search", "tool.parameters": '{"query": "weather in Paris"}'},
        }
    )
    templates.append({"name": "agent.run", "attributes": {"agent.name": "bench-agent"}})
    templates.append(
        {"name": "agentlightning.annotation", "attributes": {"agentlightning.reward.0.value": 1.0}}
    )
    templates.append({"name": "rollout", "attributes": {"rollout.step": 1}})
    return templates


# ---------------------------------------------------------------------------------------------- one client


def _span_class(system: str) -> Any:
    if system == "peer":
        from agentlightning.types import Span
    else:
        from agl_core.types import Span
    return Span


def _open(system: str, uri: str) -> Any:
    if system == "peer":
        if uri == "memory:":
            from agentlightning.store import InMemoryLightningStore

            return InMemoryLightningStore()
        from agentlightning.store import LightningStoreClient

        return LightningStoreClient(uri)
    from agl_core.store import open_store

    return open_store(uri)


async def lifecycles(system: str, store: Any, client: int, seconds: float) -> tuple[int, float, float]:
    """Run lifecycles on `store` for `seconds`; (lifecycles, start, end) on the monotonic clock."""
    span_cls = _span_class(system)
    templates = [
        span_cls.from_attributes(trace_id=f"{i:032x}", **t) for i, t in enumerate(span_templates(), 1)
    ]
    done = 0
    start = time.monotonic()
    deadline = start + seconds
    while time.monotonic() < deadline:
        await store.enqueue_rollout({"task": done, "client": client})
        attempted = await store.dequeue_rollout(worker_id=f"worker-{client}")
        if attempted is None:
            raise RuntimeError("dequeue_rollout found no rollout right after one was enqueued")
        rollout_id, attempt_id = attempted.rollout_id, attempted.attempt.attempt_id
        spans = [
            template.model_copy(
                update={
                    "rollout_id": rollout_id,
                    "attempt_id": attempt_id,
                    "sequence_id": seq,
                    "span_id": f"{seq:016x}",
                }
            )
            for seq, template in enumerate(templates, 1)
        ]
        await store.add_many_spans(spans)
        await store.update_attempt(rollout_id, attempt_id, status="succeeded")
        read = await store.query_spans(rollout_id)
        if len(read) != SPANS_PER_ROLLOUT:
            raise RuntimeError(f"query_spans returned {len(read)} spans instead of {SPANS_PER_ROLLOUT}")
        done += 1
    return done, start, time.monotonic()


def _client_process(system: str, uri: str, client: int, seconds: float, barrier: Any, results: Any) -> None:
    async def main() -> None:
        store = _open(system, uri)
        try:
            await store.query_rollouts()  # connect before the clock starts
            barrier.wait(timeout=120)
            results.put(await lifecycles(system, store, client, seconds))
        finally:
            with contextlib.suppress(Exception):
                await store.close()

    try:
        asyncio.run(main())
    except BaseException as exc:
        barrier.abort()
        results.put(("error", f"{type(exc).__name__}: {exc}", 0.0))
        raise


# ---------------------------------------------------------------------------------------------- servers


def _peer_serve(port: int, ready: Any) -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from peer_store_bench import _serve

    _serve(port, ready)


@contextlib.contextmanager
def serving(system: str, kind: str, scratch: str) -> Iterator[str]:
    """The store URI the clients of one round open (a fresh store; a fresh server for HTTP kinds)."""
    if kind == "memory":
        yield "memory:"
        return
    if kind == "sqlite":
        yield f"sqlite:///{os.path.join(tempfile.mkdtemp(dir=scratch), 'life.db')}"
        return
    if system == "peer":
        from peer_store_bench import _free_port

        ctx = multiprocessing.get_context("spawn")
        ready = ctx.Event()
        port = _free_port()
        server = ctx.Process(target=_peer_serve, args=(port, ready), daemon=True)
        server.start()
        try:
            if not ready.wait(120):
                raise RuntimeError("Agent Lightning's store server did not start within 120 s")
            yield f"http://127.0.0.1:{port}"
        finally:
            server.kill()
            server.join(timeout=30)
        return
    from store_bench import http_server

    behind = (
        "memory:"
        if kind == "http-memory"
        else f"sqlite:///{os.path.join(tempfile.mkdtemp(dir=scratch), 'server.db')}"
    )
    with http_server(behind) as uri:
        yield uri


async def _in_process(system: str, uri: str, seconds: float) -> tuple[int, float, float]:
    store = _open(system, uri)
    try:
        return await lifecycles(system, store, 0, seconds)
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            await close()


def one_round(system: str, case: str, seconds: float) -> dict[str, Any]:
    """Measure one round of `case` with this interpreter's system; lifecycles per second."""
    kind, processes = CASES[case]
    if system == "peer":
        kind = PEER_KIND[kind] if kind in ("memory", "sqlite") else "http-memory"
    scratch = tempfile.mkdtemp(prefix="agl-life-")
    try:
        with serving(system, kind, scratch) as uri:
            if not kind.startswith("http"):
                done, start, end = asyncio.run(_in_process(system, uri, seconds))
                reports = [(done, start, end)]
            else:
                ctx = multiprocessing.get_context("spawn")
                barrier = ctx.Barrier(processes)
                results = ctx.Queue()
                children = [
                    ctx.Process(target=_client_process, args=(system, uri, i, seconds, barrier, results))
                    for i in range(processes)
                ]
                for child in children:
                    child.start()
                reports = [results.get(timeout=seconds + 300) for _ in children]
                for child in children:
                    child.join(timeout=60)
                errors = [r[1] for r in reports if r[0] == "error"]
                if errors:
                    raise RuntimeError(f"a client process failed: {errors}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    total = sum(r[0] for r in reports)
    wall = max(r[2] for r in reports) - min(r[1] for r in reports)
    return {"lifecycles": total, "seconds": round(wall, 3), "rate": round(total / wall, 1)}


# ---------------------------------------------------------------------------------------------- driver


def _measure(python: str, system: str, case: str, seconds: float, pythonpath: str | None = None) -> float:
    command = [python, os.path.abspath(__file__), "--one", "--system", system, "--only", case]
    command += ["--seconds", str(seconds)]
    env = dict(os.environ)
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if pythonpath:  # the baseline checkout's agl_core shadows the installed one (children inherit it)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, env.get("PYTHONPATH")]))
        checkout = pythonpath
    # run from the checkout measured: `python -m agl_core.cli store serve` finds agl_core in its cwd first
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=seconds * 4 + 600, env=env, cwd=checkout
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return float(json.loads(done.stdout)["rate"])


def run(args: argparse.Namespace) -> dict[str, Any]:
    cases = args.only or list(CASES)
    systems = ["agl"] + (["before"] if args.baseline else []) + (["peer"] if args.peer_python else [])
    table: dict[str, Any] = {}
    for case in cases:
        rates: dict[str, list[float]] = {system: [] for system in systems}
        ratios: dict[str, list[float]] = {system: [] for system in systems[1:]}
        for round_index in range(args.rounds):
            shift = round_index % len(systems)  # who goes first rotates from round to round
            measured: dict[str, float] = {}
            for system in systems[shift:] + systems[:shift]:
                if system == "peer":
                    measured[system] = _measure(args.peer_python, "peer", case, args.seconds)
                else:
                    pythonpath = args.baseline if system == "before" else None
                    measured[system] = _measure(sys.executable, "agl", case, args.seconds, pythonpath)
                rates[system].append(measured[system])
            for other in systems[1:]:
                ratios[other].append(measured["agl"] / measured[other])
        row: dict[str, Any] = {}
        for system in systems:
            row[system] = round(statistics.median(rates[system]), 1)
        for other in systems[1:]:
            row[f"agl/{other}"] = round(statistics.median(ratios[other]), 2)
        row["rounds"] = rates
        table[case] = row
        print(f"{case}: {json.dumps(row)}", file=sys.stderr, flush=True)
    return {
        "benchmark": "rollout_life",
        "unit": "lifecycles/s",
        "seconds_per_round": args.seconds,
        "rounds": args.rounds,
        "before": f"agl_core from {args.baseline}" if args.baseline else None,
        "peer": f"agentlightning 0.3.0 via {args.peer_python}" if args.peer_python else None,
        "results": table,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--peer-python", help="an interpreter with agentlightning==0.3.0")
    parser.add_argument(
        "--baseline", help="a checkout of agl (a worktree of main) measured as before, in the same rounds"
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per case (median reported)")
    parser.add_argument("--seconds", type=float, default=3.0, help="how long each client runs per round")
    parser.add_argument("--only", nargs="*", choices=list(CASES), help="measure only these cases")
    parser.add_argument("--one", action="store_true", help="measure one round of one case here (internal)")
    parser.add_argument("--system", choices=["agl", "peer"], default="agl", help="with --one: which system")
    args = parser.parse_args()
    if args.seconds <= 0 or args.rounds < 1:
        parser.error("--seconds must be > 0 and --rounds >= 1")
    if args.one:
        if not args.only or len(args.only) != 1:
            parser.error("--one measures exactly one case: pass --only CASE")
        print(json.dumps(one_round(args.system, args.only[0], args.seconds)))
        return
    print(json.dumps(run(args), indent=2))


if __name__ == "__main__":
    main()
