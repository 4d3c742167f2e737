"""``agl store serve``: default SQLite file, printed URL, graceful shutdown on SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agl_core.store.http import LightningStoreClient

from ._support import child_env, free_port, wait_healthy
from .test_rest_api import request


def _serve(cwd: Path, port: int, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agl_core.cli", "store", "serve", "--port", str(port), *extra],
        cwd=cwd,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_defaults_to_sqlite_and_shuts_down_gracefully(tmp_path: Path, sig: signal.Signals) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = _serve(tmp_path, port)
    try:
        wait_healthy(url, process)

        async def write() -> str:
            client = LightningStoreClient(url)
            try:
                return (await client.start_rollout({"keep": "me"})).rollout_id
            finally:
                await client.close()

        rollout_id = asyncio.run(write())
        answers: list[tuple[int, object]] = []

        def long_poll() -> None:
            status, _, body = request(
                url, "POST", "/v1/agl/waits/rollouts", {"rollout_ids": [rollout_id], "timeout": 60}
            )
            answers.append((status, body))

        poller = threading.Thread(target=long_poll)
        poller.start()
        time.sleep(0.3)  # the long poll is in flight on the server
        process.send_signal(sig)
        poller.join(30)
        # The in-flight long poll was answered (nothing finished) instead of being cut off.
        assert answers == [(200, [])]
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert f"at {url}" in out and "SqliteLightningStore" in out and "stopped" in out
    assert (tmp_path / ".agl" / "store.db").exists()

    # The acknowledged rollout survived: a new server on the same file has it.
    again = _serve(tmp_path, port)
    try:
        wait_healthy(url, again)

        async def read() -> None:
            client = LightningStoreClient(url)
            try:
                found = await client.get_rollout_by_id(rollout_id)
                assert found is not None and found.input == {"keep": "me"}
            finally:
                await client.close()

        asyncio.run(read())
    finally:
        again.terminate()
        again.communicate(timeout=60)
    assert again.returncode == 0


def test_serve_reports_a_busy_port(tmp_path: Path) -> None:
    port = free_port()
    first = _serve(tmp_path, port, "--store", "memory:")
    try:
        wait_healthy(f"http://127.0.0.1:{port}", first)
        second = _serve(tmp_path, port, "--store", "memory:")
        _, err = second.communicate(timeout=60)
        assert second.returncode == 6  # ExitCode.BUSY
        assert "Cannot listen" in err and str(port) in err and "Traceback" not in err
    finally:
        first.terminate()
        first.communicate(timeout=60)


def test_serve_with_token_from_environment(tmp_path: Path) -> None:
    port = free_port()
    env = {**child_env(), "AGL_STORE_TOKEN": "from-env"}
    process = subprocess.Popen(
        [sys.executable, "-m", "agl_core.cli", "store", "serve", "--store", "memory:", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process)
        assert request(url, "GET", "/v1/agl/statistics")[0] == 401
        assert (
            request(url, "GET", "/v1/agl/statistics", headers={"Authorization": "Bearer from-env"})[0] == 200
        )
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=60)
    assert "token required" in out
