"""kill -9 under writers: the SQLite-backed server dies mid-write and restarts; every acknowledged write
is there (a bounded version of tests/store/http/test_fault.py)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from agl_core.store.http import LightningStoreClient
from tests.store.http._support import child_env, free_port, serve_command, wait_healthy

from .conftest import report

WRITERS = 2
ITERATIONS = 60
KILL_AFTER_ACKS = 30
BOUND = 180.0

WRITER = textwrap.dedent(
    """
    import asyncio, json, sys
    from agl_core.store.http import LightningStoreClient

    async def main(url, out_path, count, tag):
        client = LightningStoreClient(url, retries=10_000, retry_timeout=90, backoff=(0.05, 0.5))
        with open(out_path, "a") as out:
            for i in range(count):
                rollout = await client.enqueue_rollout({"writer": tag, "i": i})
                out.write(json.dumps(rollout.rollout_id) + "\\n")  # only after the store acknowledged
                out.flush()
        await client.close()

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
    """
)


def _start(db: Path, port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        serve_command(f"sqlite:///{db}", port),
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wait_healthy(f"http://127.0.0.1:{port}", process)
    return process


def _acked(paths: list[Path]) -> list[str]:
    return [
        json.loads(line) for path in paths if path.exists() for line in path.read_text().splitlines() if line
    ]


def test_acknowledged_writes_survive_kill_9(tmp_path: Path) -> None:
    db, port = tmp_path / "store.db", free_port()
    url = f"http://127.0.0.1:{port}"
    server = _start(db, port)
    outputs = [tmp_path / f"acks-{i}.jsonl" for i in range(WRITERS)]
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, url, str(out), str(ITERATIONS), f"w{i}"], env=child_env()
        )
        for i, out in enumerate(outputs)
    ]
    try:
        deadline = time.monotonic() + BOUND
        while len(_acked(outputs)) < KILL_AFTER_ACKS and time.monotonic() < deadline:
            time.sleep(0.02)
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=60)
        acked_at_kill = len(_acked(outputs))
        server = _start(db, port)
        for writer in writers:
            writer.wait(timeout=BOUND)
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
    acked = _acked(outputs)

    async def stored() -> set[str]:
        client = LightningStoreClient(url)
        try:
            return {r.rollout_id for r in (await client.query_rollouts(limit=-1)).items}
        finally:
            await client.close()

    try:
        present = asyncio.run(stored())
    finally:
        server.terminate()
        server.communicate(timeout=60)
    lost = sorted(set(acked) - present)
    report(
        "kill-9",
        writers=WRITERS,
        acknowledged=len(acked),
        acknowledged_before_kill=acked_at_kill,
        lost=len(lost),
    )
    assert all(writer.returncode == 0 for writer in writers)
    assert len(acked) == WRITERS * ITERATIONS
    assert not lost, f"acknowledged but missing after kill -9: {lost[:5]}"
