"""A damaged or missing SQLite file is refused with a clear error, never served half-working (issue 20)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import pytest

from agl_core.store import StoreCorruptError, StoreOpenError, _sqlite_schema
from agl_core.store.http import BackgroundServer
from agl_core.store.sqlite import SqliteLightningStore

from .http.test_rest_api import request

PAGE = 4096


async def _fill(path: Path, rollouts: int = 400) -> None:
    store = SqliteLightningStore(path)
    try:
        for index in range(rollouts):
            await store.enqueue_rollout({"text": f"{index:05d}" * 100})
    finally:
        await store.close()


def _damage_middle(path: Path) -> None:
    """Overwrite the pages after the schema's and before the last one (a mid-file corruption).

    The schema (``sqlite_schema``) spans more than page 1, so its pages are spared: a store whose
    schema cannot be read is refused by SQLite itself, before any check of ours."""
    with sqlite3.connect(path) as conn:
        first = max(
            2, *(n for (n,) in conn.execute("SELECT pageno FROM dbstat WHERE name = 'sqlite_schema'"))
        )
    conn.close()
    size = path.stat().st_size
    assert size > (first + 6) * PAGE
    with path.open("r+b") as handle:
        handle.seek(first * PAGE)
        handle.write(b"\xa5" * (size - (first + 1) * PAGE))
        handle.flush()
        os.fsync(handle.fileno())


def test_damaged_file_is_refused_at_open_with_the_recovery_command(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    asyncio.run(_fill(path))
    _damage_middle(path)
    with pytest.raises(StoreCorruptError) as caught:
        SqliteLightningStore(path)
    assert str(path) in str(caught.value)
    assert caught.value.hint is not None and ".recover" in caught.value.hint


def test_damage_found_later_makes_the_server_unhealthy_and_refuse_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store.db"
    asyncio.run(_fill(path))
    _damage_middle(path)
    # As if the damage happened after the open-time check passed (or the check ran out of time).
    monkeypatch.setattr(_sqlite_schema, "quick_check", lambda *args, **kwargs: False)
    with BackgroundServer(lambda: SqliteLightningStore(path)) as server:
        # /health probes the store with one read, so it reports the damage before any client call does.
        status, _, health = request(server.endpoint, "GET", "/health")
        assert status == 503 and health["status"] == "unhealthy"
        status, _, body = request(server.endpoint, "GET", "/v1/agl/rollouts?limit=-1")
        assert status == 503 and body["error"]["type"] == "StoreCorruptError"
        status, _, health = request(server.endpoint, "GET", "/health")
        assert status == 503 and health["status"] == "unhealthy" and ".recover" in health["reason"]
        status, _, body = request(
            server.endpoint, "POST", "/v1/agl/queues/rollouts/enqueue", {"rollouts": [{"input": "x"}]}
        )
        assert status == 503 and body["error"]["type"] == "StoreCorruptError"


def test_read_only_open_refuses_a_missing_file_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    with pytest.raises(StoreOpenError, match="No store file"):
        SqliteLightningStore(path, read_only=True)
    assert not path.exists()


def test_read_only_open_reads_without_writing(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    asyncio.run(_fill(path, rollouts=3))

    async def read() -> int:
        store = SqliteLightningStore(path, read_only=True)
        try:
            return (await store.query_rollouts()).total
        finally:
            await store.close()

    assert asyncio.run(read()) == 3


def test_unwritable_directory_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(StoreOpenError, match=r"/proc/x\.db"):
        SqliteLightningStore("/proc/x.db")
