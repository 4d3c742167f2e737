"""Faults: a server restarted under load, connections killed mid-transaction, a writer SIGKILLed."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest
from agl_postgres import PostgresLightningStore, StoreUnavailableError
from agl_postgres.testing import PgCluster

from agl_testing.store_conformance import make_span

pytestmark = pytest.mark.slow

PLUGIN_ROOT = Path(__file__).resolve().parents[1]


async def _until(predicate: object, what: str, timeout: float = 120.0) -> None:
    """Wait (bounded) until ``predicate()`` is true, yielding to the event loop."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():  # type: ignore[operator]
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def test_server_restart_under_load_loses_nothing_acknowledged(
    pg_cluster: PgCluster, schema: str
) -> None:
    """Writers keep going through a server stop/start; every acknowledged rollout is stored exactly once."""
    store = PostgresLightningStore.from_uri(f"{pg_cluster.uri}?schema={schema}", retry_timeout=120)
    acked: list[tuple[int, str]] = []
    stop = asyncio.Event()

    async def writer(k: int) -> None:
        n = 0
        while not stop.is_set():
            value = k * 1_000_000 + n
            rollout = await store.enqueue_rollout({"n": value})
            claimed = await store.dequeue_rollout(worker_id=f"w{k}")
            if claimed is not None:
                await store.update_attempt(claimed.rollout_id, claimed.attempt.attempt_id, status="succeeded")
            acked.append((value, rollout.rollout_id))
            n += 1

    try:
        tasks = [asyncio.create_task(writer(k)) for k in range(4)]
        await _until(lambda: len(acked) >= 100, "writes before the restart")
        await asyncio.to_thread(pg_cluster.stop, "fast")
        before = len(acked)
        await asyncio.to_thread(pg_cluster.start)
        await _until(lambda: len(acked) >= before + 100, "writes after the restart")
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
        assert store.connection_retries > 0, "the restart was not noticed"
        stored = await store.query_rollouts()
        inputs = [r.input["n"] for r in stored]
        assert len(inputs) == len(set(inputs)), "a retried enqueue was stored twice"
        ids = {r.rollout_id for r in stored}
        assert all(rid in ids for _, rid in acked), "an acknowledged rollout is missing"
        assert not await store.query_rollouts(status_in=["preparing", "running"]), (
            "a claim was lost in a retry"
        )
    finally:
        stop.set()
        await store.close()


async def test_unreachable_server_raises_after_retry_timeout_without_password() -> None:
    """Nothing listening: the call fails within its retry budget, naming the server but not the password."""
    from agl_postgres.testing import free_port

    store = PostgresLightningStore(
        f"postgresql://agl:s3cret-pw@127.0.0.1:{free_port()}/agl", retry_timeout=0.5, connect_timeout=1
    )
    try:
        with pytest.raises(StoreUnavailableError) as info:
            await store.get_latest_resources()
        assert "s3cret-pw" not in str(info.value) and "s3cret-pw" not in repr(store)
        assert "agl:***@127.0.0.1" in str(info.value)
    finally:
        await store.close()


async def test_connections_killed_mid_transaction_leave_whole_batches(postgres_uri: str, schema: str) -> None:
    """Backends terminated while span batches are written: each batch is wholly stored or absent."""
    uri = f"{postgres_uri}?schema={schema}"
    store = PostgresLightningStore.from_uri(uri, retry_timeout=60)
    admin = await asyncpg.connect(postgres_uri)
    try:
        started = [await store.start_rollout(i) for i in range(60)]
        acked: list[str] = []
        stop = asyncio.Event()

        async def writer(part: list) -> None:  # type: ignore[type-arg]
            for rollout in part:
                batch = [make_span(rollout.rollout_id, rollout.attempt.attempt_id, s) for s in range(1, 21)]
                await store.add_many_spans(batch)
                acked.append(rollout.rollout_id)

        async def killer() -> None:
            for _ in range(25):  # bounded, so the writers finish
                if stop.is_set():
                    return
                await admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'agl-postgres' AND pid <> pg_backend_pid()"
                )
                await asyncio.sleep(0.2)

        kill_task = asyncio.create_task(killer())
        await asyncio.wait_for(asyncio.gather(*(writer(started[i::4]) for i in range(4))), 300)
        stop.set()
        await kill_task
        assert store.connection_retries > 0, "no connection was killed"
        for rollout in started:
            spans = await store.query_spans(rollout.rollout_id)
            attempt = await store.get_latest_attempt(rollout.rollout_id)
            assert spans.total in (0, 20), f"{rollout.rollout_id}: a partial batch of {spans.total} spans"
            assert attempt is not None
            assert (spans.total == 20) == (attempt.status == "running"), "spans and heartbeat diverged"
            if rollout.rollout_id in acked:
                assert spans.total == 20, "an acknowledged batch is missing"
    finally:
        await admin.close()
        await store.close()


async def test_sigkilled_writer_loses_nothing_acknowledged(postgres_uri: str, schema: str) -> None:
    """A client process SIGKILLed mid-stream: every rollout it reported as acknowledged is stored."""
    uri = f"{postgres_uri}?schema={schema}"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.race_worker", uri],
        cwd=PLUGIN_ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(PLUGIN_ROOT)},
    )
    acked: list[str] = []
    try:
        assert process.stdout is not None
        while len(acked) < 300:
            line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), 120)
            assert line, "the writer exited early"
            acked.append(line.strip())
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    store = PostgresLightningStore.from_uri(uri)
    try:
        stored = {r.rollout_id for r in await store.query_rollouts()}
        assert set(acked) <= stored
    finally:
        await store.close()
