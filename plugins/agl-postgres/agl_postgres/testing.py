"""A throwaway PostgreSQL cluster for tests and benchmarks: ``initdb`` in a temporary directory, a free port.

PostgreSQL refuses to run as root, and CI runs as root: then the cluster belongs to the ``postgres``
system user (or ``nobody`` when there is none) and every server command runs through ``runuser``.
As any other user it runs as that user. Stop and start it again (same data, same port) to test
reconnects.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

__all__ = ["PgCluster", "free_port"]

_TIMEOUT = 120


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_user() -> str | None:
    """The user the server runs as when we are root (None: run as ourselves)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise RuntimeError(
        "Running as root, and neither a 'postgres' nor a 'nobody' user exists to own the cluster."
    )


class PgCluster:
    """One private PostgreSQL cluster listening on 127.0.0.1 at a port picked at run time."""

    def __init__(self, *, durable: bool = False) -> None:
        self.durable = durable
        """False turns ``fsync`` off (fast throwaway test clusters); True keeps PostgreSQL's defaults."""
        self.user = _server_user()
        self.root = Path(tempfile.mkdtemp(prefix="agl-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.uri = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        """Superuser URI of the cluster (trust authentication, no password)."""

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        command = list(argv) if self.user is None else ["runuser", "-u", self.user, "--", *argv]
        done = subprocess.run(command, capture_output=True, text=True, timeout=_TIMEOUT, check=False)
        if done.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(argv)} failed ({done.returncode}): {done.stderr}{done.stdout}{log}"
            )
        return done

    def init(self) -> PgCluster:
        """Create the cluster (``initdb``, trust authentication, superuser ``postgres``)."""
        if self.user is not None:
            shutil.chown(self.root, self.user)
        os.chmod(self.root, 0o700)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        return self

    def start(self) -> PgCluster:
        """Start the server and wait until it accepts connections."""
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c max_connections=300 -c shared_buffers=64MB" + ("" if self.durable else " -c fsync=off")
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "-t", "60", "start"
        )
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: roll back open transactions and disconnect; ``immediate``: crash)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def destroy(self) -> None:
        """Stop the server if it runs and delete the cluster."""
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(RuntimeError):
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
