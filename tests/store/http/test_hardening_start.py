"""``agl store serve`` tells the truth at start and ``/health`` while running (issue 34, item 4).

Start: the store is opened, read and written once; a failure exits with the documented code and one
line. Running: ``/health`` reports whether the store answers, a backend outage is 503 and a full disk 507.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agl_core.store.http import BackgroundServer, LightningStoreClient
from agl_core.store.http.errors import status_for_exception
from agl_core.store.memory import InMemoryLightningStore
from agl_core.store.sqlite import SqliteLightningStore
from agl_testing.store_conformance import make_span

from ._support import child_env, free_port
from .test_rest_api import request

BOUND = 90


def _agl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agl_core.cli", *args],
        capture_output=True,
        text=True,
        timeout=BOUND,
        env=child_env(),
        cwd=cwd,
        check=False,
    )


@pytest.mark.parametrize("uri", ["http://[::1", "http://h:notaport", "http://"])
def test_a_malformed_store_url_exits_3_with_one_line(uri: str) -> None:
    for command in (
        ["store", "show", "--store", uri, "ro-x"],
        ["store", "serve", "--store", uri, "--port", "0"],
    ):
        done = _agl(*command)
        assert done.returncode == 3, (command, done.returncode, done.stderr)
        assert (
            done.stderr.startswith(f"agl: error: Store URI {uri!r} is malformed")
            and "Traceback" not in done.stderr
        )


def test_serve_exits_4_when_the_store_server_does_not_answer() -> None:
    done = _agl("store", "serve", "--store", f"http://127.0.0.1:{free_port()}", "--port", "0")
    assert done.returncode == 4, done.stderr
    assert "failed its start check (read): cannot reach the server" in done.stderr
    assert "agl store: serving" not in done.stdout


@contextlib.contextmanager
def _read_only_dir(path: Path) -> Iterator[None]:
    """`path` on a read-only file system (a tmpfs remounted read-only), or read-only by mode bits."""
    if os.geteuid() == 0:
        mount = shutil.which("mount")
        staged = path.with_name(path.name + "-staged")
        shutil.copytree(path, staged)
        if (
            mount is None
            or subprocess.run([mount, "-t", "tmpfs", "-o", "size=16m", "none", str(path)]).returncode
        ):
            pytest.skip("running as root without mount: cannot make a read-only file system")
        try:
            for item in staged.iterdir():
                shutil.copy(item, path / item.name)
            subprocess.run([mount, "-o", "remount,ro", str(path)], check=True)
            yield
        finally:
            subprocess.run(["umount", str(path)], check=False)
    else:
        modes = {item: item.stat().st_mode for item in path.iterdir()}
        for item in modes:
            item.chmod(0o444)
        path.chmod(0o555)
        try:
            yield
        finally:
            path.chmod(0o755)
            for item, mode in modes.items():
                item.chmod(mode)


def test_serve_exits_5_on_a_read_only_store(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "store.db"

    async def fill_and_keep_the_wal() -> None:
        store = SqliteLightningStore(db)
        await store.start_rollout("x")
        shutil.copytree(folder, tmp_path / "copy")  # the file with its -wal and -shm, as a live server has
        await store.close()

    asyncio.run(fill_and_keep_the_wal())
    shutil.rmtree(folder)
    (tmp_path / "copy").rename(folder)
    with _read_only_dir(folder):
        done = _agl("store", "serve", "--store", f"sqlite:///{db}", "--port", "0")
    assert done.returncode == 5, (done.returncode, done.stdout, done.stderr)
    assert "failed its start check" in done.stderr and "read-only" in done.stderr.lower() + "readonly"


def test_health_and_calls_report_a_backend_outage_as_503() -> None:
    backend = BackgroundServer(InMemoryLightningStore)
    backend.start()
    url = backend.endpoint

    def front_store() -> LightningStoreClient:
        return LightningStoreClient(url, retries=0, retry_timeout=0.0, timeout=5.0)

    with BackgroundServer(front_store) as front:
        assert request(front.endpoint, "GET", "/health")[0] == 200
        backend.stop()
        deadline = time.monotonic() + 10  # /health reuses a probe result for a second
        status, body = 200, {}
        while status == 200 and time.monotonic() < deadline:
            status, _, body = request(front.endpoint, "GET", "/health")
        assert status == 503 and body["status"] == "unhealthy", body
        assert "ConnectionRefused" in body["reason"] or "reach" in body["reason"], body
        status, _, body = request(front.endpoint, "GET", "/v1/agl/rollouts")
        assert status == 503, body
        assert "unavailable" in body["error"]["message"].lower() or "reach" in body["error"]["message"]


def _disk_full_error() -> sqlite3.OperationalError:
    """The error SQLite raises when its file cannot grow (here: a page cap, as on a full disk)."""
    conn = sqlite3.connect(":memory:")
    conn.execute("PRAGMA max_page_count = 2")
    try:
        conn.execute("CREATE TABLE t (x BLOB)")
        conn.execute("INSERT INTO t VALUES (zeroblob(100000))")
    except sqlite3.OperationalError as exc:
        return exc
    finally:
        conn.close()
    raise AssertionError("SQLite did not report a full database")


def test_a_full_disk_is_507() -> None:
    error = _disk_full_error()
    assert "disk is full" in str(error)
    assert status_for_exception(error) == 507
    assert status_for_exception(OSError(28, "No space left on device")) == 507
    wrapped = RuntimeError("write failed")
    wrapped.__cause__ = error
    assert status_for_exception(wrapped) == 507


class _DiskFullStore(InMemoryLightningStore):
    """A store whose span writes fail as SQLite's do on a full disk (the error is SQLite's own)."""

    async def _insert_spans(self, request):  # type: ignore[no-untyped-def]
        raise _disk_full_error()


def test_a_full_disk_answers_507_with_the_json_error_shape() -> None:
    with BackgroundServer(_DiskFullStore) as server:
        rollout = request(server.endpoint, "POST", "/v1/agl/rollouts", {"input": "x"})[2]
        span = make_span(rollout["rollout_id"], rollout["attempt"]["attempt_id"], 1)
        status, _, body = request(server.endpoint, "POST", "/v1/agl/spans", span.model_dump(mode="json"))
    assert status == 507, body
    assert body["error"]["type"] == "InsufficientStorage" and "disk is full" in body["error"]["message"]
