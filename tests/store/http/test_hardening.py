"""Hostile HTTP input gets a 4xx JSON answer, never a 5xx; browsers cannot write cross-site (issue 20)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import logging
import socket
import threading

import pytest

from agl_core.store.http import BackgroundServer, LightningStoreClient
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import Span
from agl_testing.store_conformance import make_span

from .conftest import TOKEN
from .test_rest_api import request

HUGE = str(2**63)


@pytest.mark.parametrize("query", [f"limit={HUGE}", f"offset={HUGE}"])
def test_integers_beyond_int64_get_400(server: BackgroundServer, query: str) -> None:
    status, _, body = request(server.endpoint, "GET", f"/v1/agl/rollouts?{query}")
    assert status == 400
    assert "2**63-1" in body["error"]["message"]


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]
)
def test_simple_cross_site_bodies_are_refused(server: BackgroundServer, content_type: str) -> None:
    status, _, body = request(
        server.endpoint,
        "POST",
        "/v1/agl/queues/rollouts/enqueue",
        raw=b'{"rollouts": [{"input": "x"}]}',
        headers={"Content-Type": content_type},
    )
    assert status == 415, body
    assert request(server.endpoint, "GET", "/v1/agl/statistics")[2]["total_rollouts"] == 0


def test_foreign_origin_cannot_write(server: BackgroundServer) -> None:
    status, _, body = request(
        server.endpoint,
        "POST",
        "/v1/agl/queues/rollouts/enqueue",
        {"rollouts": [{"input": "x"}]},
        headers={"Origin": "http://evil.example"},
    )
    assert status == 403 and body["error"]["type"] == "ForbiddenOrigin"


def test_host_header_is_checked_against_the_bound_address(server: BackgroundServer) -> None:
    status, _, body = request(server.endpoint, "GET", "/v1/agl/rollouts", headers={"Host": "evil.example"})
    assert status == 421, body
    assert request(server.endpoint, "GET", "/v1/agl/rollouts", headers={"Host": "localhost:1"})[0] == 200


def test_any_origin_cors_never_echoes_with_credentials() -> None:
    with BackgroundServer(InMemoryLightningStore, cors_origins=["*"]) as running:
        _, headers, _ = request(
            running.endpoint, "GET", "/v1/agl/rollouts", headers={"Origin": "http://evil.example"}
        )
    assert headers.get("access-control-allow-origin") == "*"
    assert "access-control-allow-credentials" not in headers


def test_head_health(server: BackgroundServer) -> None:
    assert request(server.endpoint, "HEAD", "/health")[0] == 200


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer"])
def test_bearer_scheme_is_case_insensitive(token_server: BackgroundServer, scheme: str) -> None:
    headers = {"Authorization": f"{scheme} {TOKEN}"}
    assert request(token_server.endpoint, "GET", "/v1/agl/rollouts", headers=headers)[0] == 200


def test_repeated_server_errors_log_one_traceback(caplog: pytest.LogCaptureFixture) -> None:
    from agl_core.utils.http_guard import LogLimiter, log_limited

    logger = logging.getLogger("agl.test.flood")
    limiter = LogLimiter(interval=3600, burst=1)  # what the store server uses, with a longer window
    key = ("OverflowError", "/v1/agl/rollouts")
    with caplog.at_level(logging.ERROR, logger="agl.test.flood"):
        for _ in range(1000):
            log_limited(
                logger, logging.ERROR, key, "GET %s failed", "/x", exc_info=OverflowError(), limiter=limiter
            )
    assert len([r for r in caplog.records if r.name == "agl.test.flood"]) == 1


class _CrashingRelay:
    """TCP relay: the first connection's request reaches server A, whose answer is then lost (as if A
    crashed after writing); later connections go to server B, which has no memory of the request."""

    def __init__(self, first: str, then: str) -> None:
        self._targets = [_address(first), _address(then)]
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._connections += 1
            if self._connections == 1:
                threading.Thread(target=self._lose_answer, args=(client,), daemon=True).start()
            else:
                upstream = socket.create_connection(self._targets[1], timeout=30)
                for a, b in ((client, upstream), (upstream, client)):
                    threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    def _lose_answer(self, client: socket.socket) -> None:
        with client, socket.create_connection(self._targets[0], timeout=30) as upstream:
            data = b""
            while b"\r\n\r\n" not in data:
                data += client.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            while len(body) < length:
                body += client.recv(65536)
            upstream.sendall(head + b"\r\n\r\n" + body)
            assert upstream.recv(65536)  # A answered: the write happened; the answer is dropped

    def close(self) -> None:
        self._listener.close()


def _address(url: str) -> tuple[str, int]:
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    return host, int(port)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def test_retried_add_span_after_a_crash_returns_the_stored_span() -> None:
    store = InMemoryLightningStore()
    with BackgroundServer(store) as first, BackgroundServer(store) as restarted:
        relay = _CrashingRelay(first.endpoint, restarted.endpoint)

        async def scenario() -> tuple[Span | None, Span | None]:
            started = await store.start_rollout("x")
            span = make_span(started.rollout_id, started.attempt.attempt_id, 1)
            client = LightningStoreClient(relay.endpoint, backoff=(0.01, 0.05))
            try:
                retried = await client.add_span(span)
                duplicate = await client.add_span(span)  # a genuine second add: still None
            finally:
                await client.close()
            return retried, duplicate

        try:
            retried, duplicate = asyncio.run(scenario())
        finally:
            relay.close()
    assert retried is not None and retried.span_id is not None
    assert duplicate is None


def _exchange(endpoint: str, payload: bytes, answers: int) -> list[bytes]:
    """Send raw bytes on one keep-alive connection; return the first `answers` responses' heads+bodies."""
    with socket.create_connection(_address(endpoint), timeout=30) as sock:
        sock.sendall(payload)
        data = b""
        responses: list[bytes] = []
        while len(responses) < answers:
            chunk = sock.recv(65536)
            assert chunk, f"connection closed after {len(responses)} answer(s): {data!r}"
            data += chunk
            while b"\r\n\r\n" in data:
                head, _, rest = data.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                if len(rest) < length:
                    break
                responses.append(head + b"\r\n\r\n" + rest[:length])
                data = rest[length:]
    return responses


def test_undecodable_gzip_body_gets_json_400_and_the_connection_goes_on(server: BackgroundServer) -> None:
    body = b"\x1f\x8b\x08\x00not-really-gzip"
    first = (
        "POST /v1/agl/queues/rollouts/enqueue HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nContent-Encoding: gzip\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    second = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    bad, health = _exchange(server.endpoint, first + second, 2)
    assert b" 400 " in bad.split(b"\r\n", 1)[0] and b'"InvalidRequestError"' in bad and b"gzip" in bad
    assert b" 200 " in health.split(b"\r\n", 1)[0]


def test_gzip_body_is_accepted(server: BackgroundServer) -> None:
    payload = gzip.compress(json.dumps({"rollouts": [{"input": "zipped"}]}).encode())
    status, _, body = request(
        server.endpoint,
        "POST",
        "/v1/agl/queues/rollouts/enqueue",
        raw=payload,
        headers={"Content-Encoding": "gzip"},
    )
    assert status == 201 and body[0]["input"] == "zipped"


@pytest.mark.parametrize("encoding", ["br", "zstd"])
def test_unsupported_content_encoding_gets_json_415(server: BackgroundServer, encoding: str) -> None:
    status, headers, body = request(
        server.endpoint,
        "POST",
        "/v1/agl/queues/rollouts/enqueue",
        raw=b"\x00\x01",
        headers={"Content-Encoding": encoding},
    )
    assert status == 415 and "json" in headers["content-type"]
    assert encoding in body["error"]["message"]


def test_the_store_guard_rules() -> None:
    from aiohttp.test_utils import make_mocked_request

    from agl_core.store import InMemoryLightningStore
    from agl_core.store.http.server import LightningStoreServer

    server = LightningStoreServer(InMemoryLightningStore(), "127.0.0.1", 0)

    def status(method: str, headers: dict[str, str], path: str = "/v1/agl/spans/search") -> int | None:
        refusal = server._screen(make_mocked_request(method, path, headers=headers))
        return None if refusal is None else refusal.status

    json_post = {"Host": "127.0.0.1:4747", "Content-Type": "application/json"}
    for _ in range(2):  # the second time the Host value is a remembered one
        assert status("POST", json_post) is None
        assert status("GET", {"Host": "127.0.0.1:4747"}) is None
        assert status("POST", {**json_post, "Content-Type": "text/plain", "Content-Length": "3"}) == 415
        assert status("POST", {"Host": "127.0.0.1:4747", "Content-Length": "3"}) == 415  # a body, no type
        assert status("POST", {"Host": "127.0.0.1:4747"}) is None  # no body: 0.3's bare dequeue
        assert status("POST", {**json_post, "Content-Type": "text/plain"}) is None  # no body either
        assert status("POST", {**json_post, "Content-Encoding": "br"}) == 415
        assert status("POST", {**json_post, "Origin": "http://evil.example"}) == 403
        assert status("POST", {**json_post, "Origin": "http://127.0.0.1:4747"}) is None  # its own pages
        assert status("GET", {"Host": "127.0.0.1", "Origin": "http://evil.example"}, "/health") is None
        assert status("POST", {**json_post, "Host": "evil.example:4747"}) == 421
        assert status("POST", {**json_post, "Host": "10.1.2.3:4747"}) == 421  # no IP literals on loopback
        assert status("POST", {**json_post, "Content-Type": "Application/JSON; charset=utf-8"}) is None
        assert status("POST", {**json_post, "Content-Type": "application/x-protobuf"}, "/v1/traces") is None
    for port in range(300):  # the remembered Host values are bounded
        assert status("GET", {"Host": f"localhost:{port}"}) is None
    assert len(server._guard.hosts._seen) <= 256
    assert status("GET", {"Host": "evil.example"}) == 421
