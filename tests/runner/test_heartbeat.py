"""Heartbeats: the system snapshot (psutil optional) and the sender's store writes, fallbacks and failures."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest

from agl_core.runner import HeartbeatSender
from agl_core.store.base import UNSET, Unset
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import Worker
from agl_core.utils.system_snapshot import system_snapshot

from ._helpers import wait_until


def test_snapshot_has_host_process_and_psutil_figures() -> None:
    snapshot = system_snapshot()
    assert {"timestamp", "hostname", "pid", "cpu_count"} <= set(snapshot)
    assert snapshot["process_rss_mb"] > 0
    assert 0 <= snapshot["memory_percent"] <= 100
    assert "gpus" not in snapshot


def test_snapshot_works_without_psutil(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psutil", None)  # makes `import psutil` raise ImportError
    snapshot = system_snapshot(include_gpu=True)
    assert {"timestamp", "hostname", "pid", "cpu_count"} <= set(snapshot)
    assert "process_rss_mb" not in snapshot
    assert isinstance(snapshot["gpus"], list)


class FailingWorkerStore(InMemoryLightningStore):
    """The in-memory store with worker heartbeats failing, as a store that is down would."""

    async def update_worker(self, worker_id: str, heartbeat_stats: dict[str, Any] | Unset = UNSET) -> Worker:
        raise ConnectionError("store unreachable")


async def test_beat_updates_the_worker_and_the_current_attempt() -> None:
    store = InMemoryLightningStore()
    claimed = await store.start_rollout("t", worker_id="Worker-1")
    sender = HeartbeatSender(
        store, "Worker-1", interval=5.0, jitter=0.0, mode="asyncio", snapshot=lambda: {"load": 1}
    )
    assert await sender.beat()
    worker = await store.get_worker_by_id("Worker-1")
    assert worker is not None and worker.heartbeat_stats == {"load": 1}
    attempt = await store.get_latest_attempt(claimed.rollout_id)
    assert attempt is not None and attempt.last_heartbeat_time is None
    sender.set_current(claimed.rollout_id, claimed.attempt.attempt_id)
    await sender.beat()
    attempt = await store.get_latest_attempt(claimed.rollout_id)
    assert attempt is not None and attempt.last_heartbeat_time is not None
    assert attempt.status == "preparing"


async def test_store_failures_are_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    sender = HeartbeatSender(
        FailingWorkerStore(), "Worker-0", interval=5.0, jitter=0.0, mode="asyncio", snapshot=dict
    )
    with caplog.at_level(logging.WARNING):
        assert not await sender.beat()
    assert "store unreachable" in caplog.text
    assert sender.beats_sent == 0


async def test_failing_snapshot_still_sends_a_timestamp(caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryLightningStore()

    def broken() -> dict[str, Any]:
        raise OSError("no /proc")

    sender = HeartbeatSender(store, "Worker-0", interval=5.0, jitter=0.0, mode="asyncio", snapshot=broken)
    with caplog.at_level(logging.WARNING):
        assert await sender.beat()
    worker = await store.get_worker_by_id("Worker-0")
    assert worker is not None and worker.heartbeat_stats is not None
    assert set(worker.heartbeat_stats) == {"timestamp"}
    assert "no /proc" in caplog.text


def test_thread_mode_falls_back_to_asyncio_for_stores_that_are_not_thread_safe() -> None:
    unsafe = InMemoryLightningStore(thread_safe=False)
    safe = InMemoryLightningStore()
    assert HeartbeatSender(unsafe, "W", interval=1, jitter=0, mode="thread", snapshot=dict).mode == "asyncio"
    assert HeartbeatSender(safe, "W", interval=1, jitter=0, mode="thread", snapshot=dict).mode == "thread"
    with pytest.raises(ValueError, match="interval"):
        HeartbeatSender(safe, "W", interval=0, jitter=0, mode="thread", snapshot=dict)


@pytest.mark.parametrize("mode", ["thread", "asyncio"])
async def test_start_beats_at_once_and_stop_is_prompt(mode: Any) -> None:
    store = InMemoryLightningStore()
    sender = HeartbeatSender(
        store, "Worker-9", interval=60.0, jitter=1.0, mode=mode, snapshot=lambda: {"x": 1}
    )
    sender.start()

    async def beaten() -> bool:
        return (await store.get_worker_by_id("Worker-9")) is not None

    await wait_until(beaten)
    await sender.stop()  # returns promptly although the next beat is a minute away
    assert sender.beats_sent == 1
