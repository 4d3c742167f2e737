"""Helpers of the HTTP store tests: servers on a background thread or in a child process."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
START_TIMEOUT = 60.0


def free_port() -> int:
    """A TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(
    url: str, process: subprocess.Popen[bytes] | None = None, timeout: float = START_TIMEOUT
) -> None:
    """Poll ``{url}/health`` until it answers 200 (bounded); fail early if `process` exits."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server process exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError as exc:
            last = exc
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not become healthy within {timeout}s: {last}")


def serve_command(store_uri: str, port: int, *extra: str) -> list[str]:
    """``python -m agl_core.cli store serve`` with the given store and port."""
    return [
        sys.executable,
        "-m",
        "agl_core.cli",
        "store",
        "serve",
        "--store",
        store_uri,
        "--port",
        str(port),
        "--log-level",
        "WARNING",
        *extra,
    ]


def child_env() -> dict[str, str]:
    """Environment for child processes: the repository importable, no inherited token."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("AGL_STORE_TOKEN", None)
    return env


@contextlib.contextmanager
def server_process(
    store_uri: str, port: int | None = None, *extra: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run ``agl store serve`` in a child process; yields ``(url, process)``; stops it (bounded) after."""
    port = port or free_port()
    process = subprocess.Popen(
        serve_command(store_uri, port, *extra),
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process)
        yield url, process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
