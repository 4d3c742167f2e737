"""The client's HTTP/1.1 transport against small raw servers: reuse, chunked answers, closed
connections, timeouts and the connection limit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from agl_core.store.http.transport import READ_BUFFER_BYTES, HttpTransport, TransportError, build_request

Reply = Callable[[bytes], bytes | None]


class RawServer:
    """A TCP server answering each request with `reply(request_bytes)` (None: stay silent)."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.base_events.Server | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                answer = self.reply(request)
                if answer is None:
                    await asyncio.sleep(3600)
                writer.write(answer)
                await writer.drain()
                if b"Connection: close" in answer:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])


@pytest_asyncio.fixture
async def raw_server() -> AsyncIterator[Callable[[Reply], RawServer]]:
    servers: list[RawServer] = []

    def start(reply: Reply) -> RawServer:
        server = RawServer(reply)
        servers.append(server)
        return server

    yield start
    for server in servers:
        if server.server is not None:
            server.server.close()


async def _serve(server: RawServer) -> RawServer:
    server.server = await asyncio.start_server(server._handle, "127.0.0.1", 0)
    return server


def _ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body


def _get(path: str = "/x") -> bytes:
    return build_request("GET", path, "h", "", None)


async def test_keep_alive_connection_is_reused(raw_server: Callable[[Reply], RawServer]) -> None:
    server = await _serve(raw_server(lambda request: _ok(b'{"n":1}')))
    transport = HttpTransport("127.0.0.1", server.port)
    for _ in range(5):
        assert await transport.send(_get(), 5) == (200, b'{"n":1}', None)
    assert server.connections == 1
    await transport.close()


async def test_post_body_and_chunked_answer(raw_server: Callable[[Reply], RawServer]) -> None:
    chunked = b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    server = await _serve(raw_server(lambda request: chunked))
    transport = HttpTransport("127.0.0.1", server.port)
    request = build_request("POST", "/y", "h:1", "Content-Type: application/json\r\n", b'{"a":1}')
    assert await transport.send(request, 5) == (201, b"abcde", None)
    assert server.requests[0].endswith(b'Content-Length: 7\r\n\r\n{"a":1}')
    await transport.close()


async def test_answers_longer_than_the_read_buffer_arrive_whole(
    raw_server: Callable[[Reply], RawServer],
) -> None:
    big = bytes(range(256)) * (READ_BUFFER_BYTES // 64)  # four buffers' worth, every byte value
    chunks = b"".join(b"%x\r\n%b\r\n" % (len(part), part) for part in (big[:70_000], big[70_000:]))
    answers = iter(
        [
            _ok(big),
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n",
            _ok(b"small"),
        ]
    )
    server = await _serve(raw_server(lambda request: next(answers)))
    transport = HttpTransport("127.0.0.1", server.port)
    assert await transport.send(_get(), 5) == (200, big, None)
    assert await transport.send(_get(), 5) == (200, big, None)
    assert await transport.send(_get(), 5) == (200, b"small", None)  # the reused buffer holds no leftovers
    assert server.connections == 1
    await transport.close()


async def test_etag_is_kept_and_a_304_has_no_body_on_a_reused_connection(
    raw_server: Callable[[Reply], RawServer],
) -> None:
    answers = iter(
        [
            _ok(b'{"n":1}', b'ETag: "v1"\r\n'),
            b'HTTP/1.1 304 Not Modified\r\nEtag: "v1"\r\n\r\n',  # no body, no Content-Length
            _ok(b'{"n":2}'),
        ]
    )
    server = await _serve(raw_server(lambda request: next(answers)))
    transport = HttpTransport("127.0.0.1", server.port)
    assert await transport.send(_get(), 5) == (200, b'{"n":1}', '"v1"')
    assert await transport.send(_get(), 5) == (304, b"", '"v1"')
    assert await transport.send(_get(), 5) == (200, b'{"n":2}', None)  # not the previous answer's ETag
    assert server.connections == 1
    await transport.close()


async def test_connection_close_is_not_reused(raw_server: Callable[[Reply], RawServer]) -> None:
    server = await _serve(raw_server(lambda request: _ok(b"{}", b"Connection: close\r\n")))
    transport = HttpTransport("127.0.0.1", server.port)
    for _ in range(3):
        assert (await transport.send(_get(), 5))[0] == 200
    assert server.connections == 3
    await transport.close()


async def test_silent_server_times_out_and_caller_is_not_cancelled(
    raw_server: Callable[[Reply], RawServer],
) -> None:
    server = await _serve(raw_server(lambda request: None))
    transport = HttpTransport("127.0.0.1", server.port)
    with pytest.raises(TransportError, match="No answer within"):
        await transport.send(_get(), 0.2)
    task = asyncio.current_task()
    if hasattr(task, "cancelling"):  # Python >= 3.11
        assert task.cancelling() == 0  # the timeout's own cancellation was taken back
    assert (await asyncio.gather(asyncio.sleep(0, "still usable")))[0] == "still usable"
    await transport.close()


async def test_reused_connection_times_out_when_the_server_falls_silent(
    raw_server: Callable[[Reply], RawServer],
) -> None:
    answers = iter([_ok(b"first"), None, _ok(b"third")])
    server = await _serve(raw_server(lambda request: next(answers)))
    transport = HttpTransport("127.0.0.1", server.port)
    assert await transport.send(_get(), 5) == (200, b"first", None)
    # the second request goes out on the kept connection: its timeout closes that connection
    with pytest.raises(TransportError, match=r"^No answer within 0\.2s\.$"):
        await transport.send(_get(), 0.2)
    assert await transport.send(_get(), 5) == (200, b"third", None)
    assert server.connections == 2
    await transport.close()


async def test_requests_with_different_timeouts_each_get_their_own(
    raw_server: Callable[[Reply], RawServer],
) -> None:
    server = await _serve(raw_server(lambda request: None if b"/silent" in request else _ok(b"ok")))
    transport = HttpTransport("127.0.0.1", server.port, limit=3)
    await asyncio.gather(*(transport.send(_get(), 5) for _ in range(3)))  # three idle connections
    long, short = (asyncio.create_task(transport.send(_get("/silent"), timeout)) for timeout in (30, 0.2))
    with pytest.raises(TransportError, match=r"No answer within 0\.2s"):
        await short
    assert not long.done()  # the long request keeps waiting: only the short one's deadline passed
    assert (await transport.send(_get(), 5))[0] == 200
    long.cancel()
    with pytest.raises(asyncio.CancelledError):
        await long
    await transport.close()


async def test_refused_connection_is_a_transport_error() -> None:
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    transport = HttpTransport("127.0.0.1", port)
    with pytest.raises(TransportError, match="Connect"):
        await transport.send(_get(), 5)


async def test_connection_limit_queues_requests(raw_server: Callable[[Reply], RawServer]) -> None:
    server = await _serve(raw_server(lambda request: _ok(b"ok")))
    transport = HttpTransport("127.0.0.1", server.port, limit=2)
    results = await asyncio.gather(*(transport.send(_get(f"/{n}"), 5) for n in range(20)))
    assert results == [(200, b"ok", None)] * 20
    assert server.connections <= 2
    await transport.close()
