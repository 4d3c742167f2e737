"""Slow and many clients cannot stall the store server (issue 34, item 3).

Each test bounds its own run time: sockets have timeouts and every wait has a deadline.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from agl_core.store.http import BackgroundServer
from agl_core.store.memory import InMemoryLightningStore

from .test_rest_api import request

TIMEOUT = 1.0
BOUND = 15.0


@pytest.fixture
def quick() -> Iterator[BackgroundServer]:
    """A server that gives a request head and a body one second each."""
    with BackgroundServer(InMemoryLightningStore, header_timeout=TIMEOUT, body_timeout=TIMEOUT) as running:
        yield running


def _address(server: BackgroundServer) -> tuple[str, int]:
    host, port = server.endpoint.split("://")[1].rsplit(":", 1)
    return host, int(port)


def _connect(address: tuple[str, int]) -> socket.socket:
    return socket.create_connection(address, timeout=BOUND)


def _read_until_closed(sock: socket.socket, deadline: float) -> bytes:
    """Everything the server sends until it closes the connection (b"" if it never does by `deadline`)."""
    data = b""
    while time.monotonic() < deadline:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return b""
        except OSError:
            return data or b"<reset>"
        if not chunk:
            return data or b"<closed>"
        data += chunk
    return b""


def _dribble(sock: socket.socket, data: bytes, until: float) -> None:
    """Send `data` one byte at a time, 0.2 s apart, until it is sent, the server closes, or `until`."""
    for byte in data:
        if time.monotonic() > until:
            return
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            return
        time.sleep(0.2)  # the slow client's pace, not a synchronisation


def test_a_trickling_body_gets_408_and_the_connection_closes(quick: BackgroundServer) -> None:
    sockets = []
    for _ in range(20):
        sock = _connect(_address(quick))
        sock.sendall(
            b"POST /v1/agl/rollouts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{"
        )
        sockets.append(sock)
    started = time.monotonic()
    answers = [_read_until_closed(sock, started + BOUND) for sock in sockets]
    waited = time.monotonic() - started
    for sock in sockets:
        sock.close()
    assert all(answer.startswith(b"HTTP/1.1 408") for answer in answers), answers[0][:200]
    body = json.loads(answers[0].split(b"\r\n\r\n", 1)[1])
    assert "did not arrive within 1 s" in body["error"]["message"]
    assert waited < TIMEOUT + 5
    assert request(quick.endpoint, "GET", "/v1/agl/statistics")[2]["total_rollouts"] == 0


def test_a_second_request_head_that_trickles_is_closed(quick: BackgroundServer) -> None:
    sock = _connect(_address(quick))
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    sock.settimeout(BOUND)
    first = sock.recv(65536)
    assert first.startswith(b"HTTP/1.1 200")
    started = time.monotonic()
    _dribble(
        sock, b"GET /v1/agl/rollouts HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200, started + BOUND
    )
    closed_after = time.monotonic() - started
    assert _read_until_closed(sock, time.monotonic() + BOUND) != b""
    sock.close()
    assert closed_after < TIMEOUT + 3
    assert quick.server is not None and quick.server.connections.closed_slow >= 1


def test_a_first_request_head_that_trickles_is_closed(quick: BackgroundServer) -> None:
    sock = _connect(_address(quick))
    started = time.monotonic()
    _dribble(
        sock, b"GET /v1/agl/rollouts HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200, started + BOUND
    )
    closed_after = time.monotonic() - started
    sock.close()
    assert closed_after < TIMEOUT + 3


def test_over_long_urls_get_the_json_error_shape_and_one_log_line(
    server: BackgroundServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for _ in range(100):
        sock = _connect(_address(server))
        sock.sendall(b"GET /v1/agl/rollouts?" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = _read_until_closed(sock, time.monotonic() + BOUND)
        sock.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith((b"HTTP/1.0 400", b"HTTP/1.1 400")) and b"application/json" in head, answer[
            :300
        ]
        error = json.loads(body)["error"]
        assert error["type"] == "LineTooLong" and "under 8190 bytes" in error["message"]
    assert request(server.endpoint, "GET", "/health")[0] == 200
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(noisy) == 1, [r.getMessage()[:120] for r in noisy]
    assert "LineTooLong" not in (noisy[0].exc_text or "") and noisy[0].exc_info is None


_SERVE_WITH_FEW_FILES = textwrap.dedent(
    """
    import resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    from agl_core.cli import main
    sys.argv = ["agl", "store", "serve", "--store", "memory:", "--port", "0"]
    main()
    """
)


def test_with_256_files_300_slow_bodies_do_not_lock_out_new_clients() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVE_WITH_FEW_FILES],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    sockets: list[socket.socket] = []
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # "agl store: serving ... at http://127.0.0.1:PORT (pid ...)"
        assert " at http://" in line, line
        endpoint = line.split(" at ", 1)[1].split(" ", 1)[0]
        address = ("127.0.0.1", int(endpoint.rsplit(":", 1)[1]))
        for _ in range(300):
            sock = _connect(address)
            sock.sendall(
                b"POST /v1/agl/rollouts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100\r\n\r\n{"
            )
            sockets.append(sock)
        started = time.monotonic()
        status = request(endpoint, "GET", "/health")[0]
        answered_after = time.monotonic() - started
        assert status == 200 and answered_after < 5.0, answered_after
    finally:
        for sock in sockets:
            sock.close()
        process.terminate()
        try:
            _, stderr = process.communicate(timeout=BOUND)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate(timeout=BOUND)
    assert "at its cap of 192 open connections" in stderr, stderr[-2000:]
    assert stderr.count("at its cap of") == 1
    assert stderr.count("out of open files") <= 1 and "Traceback" not in stderr, stderr[-2000:]
