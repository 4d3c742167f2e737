"""Connection loss: the server is killed mid-run and restarted on the same port and file.

Calls made while it is down retry until it is back and then succeed; nothing acknowledged is lost and
nothing retried is applied twice. Past ``retry_timeout`` a call raises `StoreUnavailableError`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agl_core.types import LLM
from agl_mongo import MongoLightningStore, StoreUnavailableError
from agl_testing.store_conformance import make_span
from tests.nx_server import NxServer

pytestmark = pytest.mark.slow

ROLLOUTS = 40
KILL_AFTER = 12
SPANS = 3


async def _wait_until(condition: Callable[[], bool], timeout: float) -> None:
    """Poll `condition` until it holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def test_calls_survive_a_server_restart(tmp_path: Path, database: str) -> None:
    """A runner loop keeps going across a server kill and restart; every count is exact afterwards."""
    server = NxServer(tmp_path / "nx", db=str(tmp_path / "store.db")).start()
    store = MongoLightningStore(
        server.uri, database=database, retry_timeout=120, client_kwargs={"serverSelectionTimeoutMS": 300}
    )
    acked: list[str] = []
    claims: list[tuple[str, str]] = []

    async def runner() -> None:
        for i in range(ROLLOUTS):
            queued = await store.enqueue_rollout({"i": i})
            acked.append(queued.rollout_id)
            claimed = await store.dequeue_rollout(worker_id="survivor")
            assert claimed is not None and claimed.rollout_id == queued.rollout_id
            rid, aid = claimed.rollout_id, claimed.attempt.attempt_id
            claims.append((rid, aid))
            ids = await store.get_many_span_sequence_ids([(rid, aid)] * SPANS)
            assert len(await store.add_many_spans([make_span(rid, aid, s) for s in ids])) == SPANS
            await store.update_attempt(rid, aid, status="succeeded")

    try:
        resources = await store.add_resources({"llm": LLM(endpoint="http://llm/v1", model="m")})
        task = asyncio.create_task(runner())
        try:
            await _wait_until(lambda: len(acked) >= KILL_AFTER or task.done(), 120)
            server.kill()
            await _wait_until(lambda: store.connection_retries > 0 or task.done(), 60)
            assert not task.done(), "the runner finished although the server was down"
            server.start()
            await asyncio.wait_for(task, 300)
        finally:
            task.cancel()

        assert await store.get_latest_resources() == resources
        assert len(set(acked)) == ROLLOUTS and [rid for rid, _ in claims] == acked
        for rid, aid in claims:
            rollout = await store.get_rollout_by_id(rid)
            assert rollout is not None and rollout.status == "succeeded"
            assert [a.attempt_id for a in await store.query_attempts(rid)] == [aid], "claimed twice"
            spans = await store.query_spans(rid)
            sequence_ids = [s.sequence_id for s in spans]
            assert len(sequence_ids) == SPANS and sequence_ids == sorted(set(sequence_ids))
        stats = await store.statistics()
        assert (stats["total_rollouts"], stats["total_attempts"], stats["total_spans"]) == (
            ROLLOUTS,
            ROLLOUTS,
            ROLLOUTS * SPANS,
        )
        assert (stats["total_resources"], stats["total_workers"]) == (1, 1)
        assert await store.dequeue_rollout() is None
    finally:
        await store.close()
        server.kill()


async def test_unreachable_server_raises_after_retry_timeout(tmp_path: Path, database: str) -> None:
    """With the server gone a call retries for retry_timeout, then names the URI (password hidden)."""
    server = NxServer(tmp_path / "nx", db=str(tmp_path / "store.db")).start()
    uri = f"mongodb://agl:s3cret@127.0.0.1:{server.port}/?directConnection=true"
    store = MongoLightningStore(
        uri, database=database, retry_timeout=1.0, client_kwargs={"serverSelectionTimeoutMS": 200}
    )
    server.kill()
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as caught:
            await asyncio.wait_for(store.enqueue_rollout("x"), 30)
        assert time.monotonic() - started < 15
        message = str(caught.value)
        assert f"127.0.0.1:{server.port}" in message and "retry_timeout" in message
        assert "s3cret" not in message and "agl:***@" in message
        assert isinstance(caught.value, ConnectionError)
    finally:
        await store.close()
