"""Fixtures: an nx-27017 MongoDB-protocol server for the Mongo collections' tests, a fresh database each."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

NX_START_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_ping(uri: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Return once the server answers ``ping``; raise when it exits or after `NX_START_TIMEOUT_S`."""
    from pymongo import MongoClient
    from pymongo.errors import PyMongoError

    deadline = time.monotonic() + NX_START_TIMEOUT_S
    while process.poll() is None:
        try:
            with MongoClient(uri, serverSelectionTimeoutMS=500, connectTimeoutMS=500) as client:
                client.admin.command("ping")
            return
        except PyMongoError:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"nx-27017 did not answer within {NX_START_TIMEOUT_S:.0f}s; see {log}"
                ) from None
            time.sleep(0.1)  # polling a child process that has no readiness signal
    raise RuntimeError(f"nx-27017 exited with code {process.returncode}; see {log}")


@pytest.fixture(scope="session")
def mongo_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URI of an in-memory nx-27017 server started for the session (killed at the end)."""
    executable = shutil.which("nx-27017", path=os.path.dirname(sys.executable)) or shutil.which("nx-27017")
    if executable is None:
        pytest.fail("nx-27017 is not installed: pip install 'agl-legacy[test]'")
    workdir = tmp_path_factory.mktemp("nx-27017")
    port = _free_port()
    log = workdir / "nx-27017.out"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [executable, "--db", "memory", "--host", "127.0.0.1", "--port", str(port)], stdout=out, stderr=out
        )
    try:
        uri = f"mongodb://127.0.0.1:{port}/?directConnection=true"
        _wait_for_ping(uri, process, log)
        yield uri
    finally:
        process.kill()
        process.wait(timeout=30)


@pytest.fixture
def database() -> str:
    """A database name no other test uses."""
    return f"agl_test_{uuid.uuid4().hex[:12]}"
