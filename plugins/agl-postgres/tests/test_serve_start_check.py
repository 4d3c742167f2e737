"""``agl store serve`` on PostgreSQL checks the store before serving (issue 34): a malformed URI exits 3,
a server nobody listens on exits 4, a served store answers /health."""

from __future__ import annotations

import socket
import subprocess
import sys

BOUND = 120


def _serve(uri: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agl_core.cli", "store", "serve", "--store", uri, "--port", "0"],
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_malformed_uri_exits_3() -> None:
    done = _serve("postgresql://h:notaport/db")
    assert done.returncode == 3, done.stderr
    assert "failed its start check (read)" in done.stderr and "notaport" in done.stderr
    assert "agl store: serving" not in done.stdout


def test_a_server_nobody_listens_on_exits_4() -> None:
    done = _serve(f"postgresql://agl@127.0.0.1:{_closed_port()}/agl?retry_timeout=1")
    assert done.returncode == 4, done.stderr
    assert "failed its start check (read)" in done.stderr
    assert "agl store: serving" not in done.stdout
