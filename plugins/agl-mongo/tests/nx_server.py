"""Run an ``nx-27017`` MongoDB-protocol server for the tests, on 127.0.0.1 and a port picked at run time."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from pymongo import MongoClient
from pymongo.errors import PyMongoError

__all__ = ["NxServer", "free_port"]

START_TIMEOUT = 60.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _executable() -> str:
    found = shutil.which("nx-27017", path=os.path.dirname(sys.executable)) or shutil.which("nx-27017")
    if found is None:
        raise RuntimeError(
            "nx-27017 is not installed; install the plugin's test extra: pip install 'agl-mongo[test]'"
        )
    return found


class NxServer:
    """One ``nx-27017`` process; `db` is ``"memory"`` or a SQLite file (needed to survive a restart).

    `start` waits (bounded) until the server answers ``ping``; `kill` stops it at once (SIGKILL);
    `start` again reuses the same port and file.
    """

    def __init__(self, workdir: Path, db: str = "memory", port: int | None = None) -> None:
        self.workdir = workdir
        self.db = db
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        """The URI of this server (direct connection, no replica set)."""
        return f"mongodb://127.0.0.1:{self.port}/?directConnection=true"

    def start(self) -> NxServer:
        """Launch the server and wait until it answers, or raise after `START_TIMEOUT` seconds."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.workdir / "nx-27017.out", "ab")  # noqa: SIM115 -- handed to the child process
        command = [
            _executable(),
            "--db",
            self.db,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-file",
            str(self.workdir / "nx-27017.log"),
            "--pid-file",
            str(self.workdir / "nx-27017.pid"),
        ]
        self.process = subprocess.Popen(command, stdout=log, stderr=log)
        log.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                output = self.workdir / "nx-27017.out"
                raise RuntimeError(f"nx-27017 exited with code {self.process.returncode}; see {output}")
            try:
                with MongoClient(self.uri, serverSelectionTimeoutMS=500, connectTimeoutMS=500) as client:
                    client.admin.command("ping")
                return
            except PyMongoError:
                if time.monotonic() > deadline:
                    self.kill()
                    raise RuntimeError(
                        f"nx-27017 did not answer on port {self.port} within {START_TIMEOUT:.0f}s"
                    ) from None
                time.sleep(0.1)

    def kill(self) -> None:
        """Stop the server at once (SIGKILL) and wait for it to exit."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self.process = None
