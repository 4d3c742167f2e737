"""Slow headers: sockets that never finish their request head are closed; the server keeps answering."""

from __future__ import annotations

import socket
import time
import urllib.request

from agl_core.store.http import BackgroundServer
from agl_core.store.memory import InMemoryLightningStore

from .conftest import report

SOCKETS = 200
HEADER_TIMEOUT = 1.0
BOUND = 120.0


def _closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_slow_header_sockets_are_closed() -> None:
    with BackgroundServer(InMemoryLightningStore, header_timeout=HEADER_TIMEOUT) as server:
        host, port = server.endpoint.split("://")[1].rsplit(":", 1)
        sockets = []
        for _ in range(SOCKETS):
            sock = socket.create_connection((host, int(port)), timeout=30)
            sock.sendall(b"GET /v1/agl/rollouts HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # never ends
            sock.setblocking(False)
            sockets.append(sock)
        with urllib.request.urlopen(f"{server.endpoint}/health", timeout=30) as response:
            healthy_meanwhile = response.status == 200
        started = time.monotonic()
        open_sockets = set(range(SOCKETS))
        while open_sockets and time.monotonic() - started < BOUND:
            open_sockets = {i for i in open_sockets if not _closed_by_server(sockets[i])}
            time.sleep(0.1)
        waited = time.monotonic() - started
        swept = server.server.connections.closed_slow if server.server is not None else -1
        for sock in sockets:
            sock.close()
    report(
        "slow-headers",
        sockets=SOCKETS,
        header_timeout=HEADER_TIMEOUT,
        closed_by_server=SOCKETS - len(open_sockets),
        swept=swept,
        seconds_until_all_closed=round(waited, 2),
    )
    assert healthy_meanwhile
    assert not open_sockets, f"{len(open_sockets)} slow-header sockets still open after {BOUND}s"
