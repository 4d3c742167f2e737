"""Fault test: the SQLite-backed server is SIGKILLed while 4 client processes write; it restarts on the
same file and port; the clients ride out the outage on their own and every acknowledged write is there."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agl_core.store.http import LightningStoreClient

from ._support import child_env, free_port, serve_command, wait_healthy

CLIENT_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from agl_core.store.http import LightningStoreClient
    from agl_core.types import Span

    url, out_path, count, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

    async def main():
        client = LightningStoreClient(url, retries=10_000, retry_timeout=90, backoff=(0.05, 0.5))
        with open(out_path, "a") as out:
            def ack(record):  # written only after the store acknowledged the call
                out.write(json.dumps(record) + "\\n")
                out.flush()
            for i in range(count):
                rollout = await client.enqueue_rollout({"client": tag, "i": i})
                ack({"rollout": rollout.rollout_id})
                claimed = await client.dequeue_rollout(worker_id=tag)
                if claimed is None:
                    continue
                rid, aid = claimed.rollout_id, claimed.attempt.attempt_id
                spans = [Span.from_attributes(attributes={"i": i, "k": k}, rollout_id=rid, attempt_id=aid,
                                              sequence_id=k) for k in range(1, 4)]
                await client.add_many_spans(spans)
                ack({"spans": [[rid, aid, s.span_id] for s in spans]})
                single = Span.from_attributes(attributes={"single": True}, rollout_id=rid, attempt_id=aid,
                                              sequence_id=4)
                await client.add_span(single)
                ack({"spans": [[rid, aid, single.span_id]]})
                await client.update_attempt(rid, aid, status="succeeded")
        await client.close()
        print("client done", flush=True)

    asyncio.run(main())
    """
)

CLIENTS = 4
ITERATIONS = 120
KILL_AFTER_ACKS = 120
BOUND = 240.0


def _start_server(db: Path, port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        serve_command(f"sqlite:///{db}", port),
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wait_healthy(f"http://127.0.0.1:{port}", process)
    return process


def _acks(paths: list[Path]) -> list[dict[str, list[list[str]] | str]]:
    records = []
    for path in paths:
        if path.exists():
            records.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return records


@pytest.mark.slow
def test_sigkilled_server_loses_no_acknowledged_write(tmp_path: Path) -> None:
    db, port = tmp_path / "store.db", free_port()
    url = f"http://127.0.0.1:{port}"
    server = _start_server(db, port)
    outputs = [tmp_path / f"client-{n}.jsonl" for n in range(CLIENTS)]
    clients = [
        subprocess.Popen(
            [sys.executable, "-c", CLIENT_SCRIPT, url, str(out), str(ITERATIONS), f"worker-{n}"],
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n, out in enumerate(outputs)
    ]
    restarted: subprocess.Popen[bytes] | None = None
    try:
        deadline = time.monotonic() + BOUND
        while len(_acks(outputs)) < KILL_AFTER_ACKS:
            assert time.monotonic() < deadline, "the clients made no progress"
            assert all(c.poll() is None for c in clients), "a client ended before the kill"
            time.sleep(0.02)
        server.send_signal(signal.SIGKILL)
        server.wait(30)
        acked_before_kill = len(_acks(outputs))
        restarted = _start_server(db, port)
        for client in clients:
            out, err = client.communicate(timeout=BOUND)
            assert client.returncode == 0, err.decode()[-2000:]
            assert b"client done" in out
        acks = _acks(outputs)
        assert len(acks) > acked_before_kill  # they kept writing after the restart
        rollout_ids = [r["rollout"] for r in acks if "rollout" in r]
        span_keys = [tuple(key) for r in acks if "spans" in r for key in r["spans"]]
        assert len(rollout_ids) == CLIENTS * ITERATIONS

        async def verify() -> None:
            client = LightningStoreClient(url)
            try:
                found = {r.rollout_id for r in await client.query_rollouts(rollout_id_in=rollout_ids)}
                assert set(rollout_ids) <= found
                stored: set[tuple[str, str, str]] = set()
                for rid, aid in {(k[0], k[1]) for k in span_keys}:
                    stored |= {
                        (s.rollout_id, s.attempt_id, s.span_id) for s in await client.query_spans(rid, aid)
                    }
                missing = set(span_keys) - stored
                assert not missing, f"{len(missing)} acknowledged spans are missing"
            finally:
                await client.close()

        asyncio.run(verify())
    finally:
        for process in [*clients, server, *([restarted] if restarted else [])]:
            if process.poll() is None:
                process.kill()
                process.wait(30)
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
