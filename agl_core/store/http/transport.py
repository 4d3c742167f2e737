"""A lean HTTP/1.1 keep-alive client transport for the store client: one connection pool per event loop.

Why not ``aiohttp.ClientSession``: measured on the reference 2-core machine, one aiohttp client request
costs 200-300 µs of CPU, which alone caps a client that awaits each call at ~3-4k calls/s before the
server does any work. The store client only ever sends small JSON requests to one server and reads
``Content-Length`` (or chunked) answers, so it uses an `asyncio.Protocol` per connection, writes each
request with a single ``transport.write`` and parses answers with ``httptools`` (llhttp, the parser of
Node.js and uvicorn): about 40 µs per request. TLS (``https://``) goes through asyncio's ssl support.

Connections are reused while the server keeps them alive; a pool holds at most ``limit`` connections
(further requests wait for a free one). A connection that the server closed is dropped, never reused.
Of the answer's headers only ``ETag`` is kept (for conditional requests); a ``304 Not Modified`` has no
body by definition and answers ``b""``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl as ssl_module
import threading
from typing import NamedTuple

import httptools

from agl_core.store.http.network import ProxySettings

__all__ = ["READ_BUFFER_BYTES", "HttpAnswer", "HttpTransport", "TransportError", "build_request"]

READ_BUFFER_BYTES = 64 * 1024
"""Size of each connection's read buffer (one read takes at most this much of an answer)."""


class HttpAnswer(NamedTuple):
    """One answer: status code, body and the ``ETag`` header (None when the answer had none)."""

    status: int
    body: bytes
    etag: str | None


class TransportError(ConnectionError):
    """The request could not be completed: connect failure, reset, malformed answer or timeout."""


class _NoAnswerInTime(TransportError):
    """The answer did not come within the request's timeout."""


class _Connection(asyncio.BufferedProtocol):
    """One keep-alive connection; `request` sends one request and waits for its full answer.

    A buffered protocol: the socket is read into one buffer of `READ_BUFFER_BYTES` kept per
    connection. A plain `asyncio.Protocol` on the default event loop gets each read as a new bytes
    object of 256 KiB, shrunk to the data that came: for a small answer that allocation (and the page
    faults behind it) cost more than everything else the client does for a request.
    """

    __slots__ = (
        "_buffer",
        "_chunks",
        "_etag",
        "_parser",
        "_waiter",
        "closed",
        "deadline",
        "keep_alive",
        "timeout",
        "transport",
    )

    def __init__(self) -> None:
        self._buffer = memoryview(bytearray(READ_BUFFER_BYTES))
        self.transport: asyncio.Transport | None = None
        self.deadline = 0.0
        """When (on the loop's clock) the answer of the request in flight must be complete."""
        self.timeout = 0.0
        """The seconds that request was given (for the error message)."""
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[HttpAnswer] | None = None
        self._chunks: list[bytes] = []
        self._etag: str | None = None
        self.closed = False
        self.keep_alive = True

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._buffer

    def buffer_updated(self, nbytes: int) -> None:
        # the parser copies what it hands on (header values, body chunks), so the buffer is free again
        self.data_received(self._buffer[:nbytes])

    def data_received(self, data: bytes | memoryview) -> None:
        """Parse a piece of the answer (the buffered reads come here too)."""
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(TransportError(f"Malformed HTTP answer: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(TransportError(f"The server closed the connection{f': {exc}' if exc else ''}."))

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._chunks = []
        self._etag = None

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == 4 and name.lower() == b"etag":
            self._etag = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)

    def on_message_complete(self) -> None:
        self.keep_alive = self._parser.should_keep_alive()
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            chunks = self._chunks
            waiter.set_result(
                HttpAnswer(
                    self._parser.get_status_code(),
                    chunks[0] if len(chunks) == 1 else b"".join(chunks),
                    self._etag,
                )
            )

    def _fail(self, error: Exception) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)

    def time_out(self) -> None:
        """Fail the request in flight (no answer within its timeout) and close the connection."""
        self._fail(_NoAnswerInTime(f"No answer within {self.timeout:g}s."))
        self.close()

    def close(self) -> None:
        """Close the socket (idempotent; a connection of a closed event loop is left to the collector)."""
        self.closed = True
        if self.transport is not None:
            with contextlib.suppress(RuntimeError):  # its event loop is already closed
                self.transport.close()

    async def request(self, data: bytes, loop: asyncio.AbstractEventLoop) -> HttpAnswer:
        """Send `data` (a complete request) and return its answer."""
        if self.closed or self.transport is None or self.transport.is_closing():
            raise TransportError("The connection is closed.")
        waiter: asyncio.Future[HttpAnswer] = loop.create_future()
        self._waiter = waiter
        self.transport.write(data)
        return await waiter


class _TunnelOpener(asyncio.Protocol):
    """Reads a proxy's answer to ``CONNECT`` (status line and headers) into `answer`."""

    def __init__(self) -> None:
        self.answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._buffer = b""

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if b"\r\n\r\n" in self._buffer and not self.answer.done():
            self.answer.set_result(self._buffer)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.answer.done():
            self.answer.set_exception(
                TransportError("The proxy closed the connection before answering CONNECT.")
            )


class _Pool:
    """Idle connections of one event loop, bounded by `limit` open connections.

    Requests sent on an idle connection are timed by one `watchdog` timer per pool, due at the
    earliest deadline of the connections in `busy` (a timer per request costs more than the request's
    own work on the client); requests that must wait for a connection have their own timer.
    """

    __slots__ = ("busy", "closed", "idle", "loop", "open", "waiters", "watchdog")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.closed = False
        self.idle: list[_Connection] = []
        self.busy: set[_Connection] = set()
        self.watchdog: asyncio.TimerHandle | None = None
        self.open = 0
        self.waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def idle_connection(self) -> _Connection | None:
        """An open idle connection (taken out of `idle`), or None."""
        idle = self.idle
        while idle:
            connection = idle.pop()
            if not connection.closed:
                return connection
            self.open -= 1
        return None

    def watch(self, connection: _Connection, timeout: float) -> None:
        """Time the request about to be sent on `connection` (see the class docstring)."""
        deadline = self.loop.time() + timeout
        connection.deadline, connection.timeout = deadline, timeout
        self.busy.add(connection)
        watchdog = self.watchdog
        if watchdog is None or watchdog.when() > deadline:
            if watchdog is not None:
                watchdog.cancel()
            self.watchdog = self.loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        """Time out the busy connections past their deadline; wait for the next deadline."""
        self.watchdog = None
        now = self.loop.time()
        nearest: float | None = None
        for connection in list(self.busy):
            if connection.deadline <= now:
                self.busy.discard(connection)
                connection.time_out()
            elif nearest is None or connection.deadline < nearest:
                nearest = connection.deadline
        if nearest is not None:
            self.watchdog = self.loop.call_at(nearest, self._expire)


class HttpTransport:
    """Send HTTP/1.1 requests to one server (`host`, `port`, optional TLS) from any event loop.

    Args:
        host: Server host name or address.
        port: Server port.
        use_tls: Speak HTTPS (certificate checked with ``ssl_context``, else the default context).
        limit: Most open connections per event loop.
        ssl_context: TLS settings for HTTPS (trusted CAs, client certificate).
        proxy: A forward proxy: HTTPS goes through a ``CONNECT`` tunnel, HTTP as absolute-form requests
            (send them with `target_prefix` and `proxy_headers`).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        use_tls: bool = False,
        limit: int = 100,
        ssl_context: ssl_module.SSLContext | None = None,
        proxy: ProxySettings | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.limit = max(1, limit)
        self._ssl: ssl_module.SSLContext | None = (
            (ssl_context or ssl_module.create_default_context()) if use_tls else None
        )
        host_header = host if ":" not in host else f"[{host}]"
        default_port = 443 if use_tls else 80
        self.host_header = host_header if port == default_port else f"{host_header}:{port}"
        self.proxy = proxy
        plain_proxy = proxy is not None and not use_tls
        self.target_prefix = f"http://{self.host_header}" if plain_proxy else ""
        """Put before each request target: absolute-form when an HTTP request goes through a proxy."""
        self.proxy_headers = (
            f"Proxy-Authorization: {proxy.authorization}\r\n"
            if plain_proxy and proxy is not None and proxy.authorization
            else ""
        )
        """Header lines each request carries for the proxy (its credentials, for plain HTTP)."""
        self._pools: dict[asyncio.AbstractEventLoop, _Pool] = {}
        self._lock = threading.Lock()

    def _pool(self, loop: asyncio.AbstractEventLoop) -> _Pool:
        pool = self._pools.get(loop)
        if pool is None:
            with self._lock:
                for stale in [lp for lp in self._pools if lp.is_closed()]:
                    del self._pools[stale]
                pool = self._pools.setdefault(loop, _Pool(loop))
        return pool

    async def _acquire(self, pool: _Pool) -> _Connection:
        while pool.open >= self.limit:
            waiter = pool.loop.create_future()
            pool.waiters.append(waiter)
            await waiter
            connection = pool.idle_connection()
            if connection is not None:
                return connection
        pool.open += 1
        try:
            if self.proxy is None:
                _, protocol = await pool.loop.create_connection(
                    _Connection,
                    self.host,
                    self.port,
                    ssl=self._ssl,
                    server_hostname=self.host if self._ssl is not None else None,
                )
            elif self._ssl is None:
                _, protocol = await pool.loop.create_connection(_Connection, self.proxy.host, self.proxy.port)
            else:
                protocol = await self._open_tunnel(pool.loop, self.proxy, self._ssl)
        except BaseException:
            pool.open -= 1
            self._wake(pool)
            raise
        return protocol

    async def _open_tunnel(
        self, loop: asyncio.AbstractEventLoop, proxy: ProxySettings, context: ssl_module.SSLContext
    ) -> _Connection:
        """A TLS connection to the server through the proxy's ``CONNECT`` tunnel."""
        transport, opener = await loop.create_connection(_TunnelOpener, proxy.host, proxy.port)
        try:
            authority = f"{f'[{self.host}]' if ':' in self.host else self.host}:{self.port}"
            head = f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n"
            if proxy.authorization:
                head += f"Proxy-Authorization: {proxy.authorization}\r\n"
            transport.write((head + "\r\n").encode("latin-1"))
            answer = await opener.answer
            status_line = answer.split(b"\r\n", 1)[0].decode("latin-1", "replace")
            parts = status_line.split(" ", 2)
            if len(parts) < 2 or parts[1] != "200":
                raise TransportError(
                    f"The proxy {proxy.host}:{proxy.port} refused the tunnel to {authority}: {status_line!r}."
                )
            connection = _Connection()
            tls = await loop.start_tls(transport, connection, context, server_hostname=self.host)
            if tls is None:  # pragma: no cover - only when the loop closes meanwhile
                raise TransportError("The TLS handshake through the proxy was interrupted.")
            connection.connection_made(tls)
            return connection
        except BaseException:
            transport.close()
            raise

    def _release(self, pool: _Pool, connection: _Connection, reusable: bool) -> None:
        if reusable and connection.keep_alive and not connection.closed and not pool.closed:
            pool.idle.append(connection)
        else:
            connection.close()
            pool.open -= 1
        self._wake(pool)

    @staticmethod
    def _wake(pool: _Pool) -> None:
        while pool.waiters:
            waiter = pool.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def send(self, data: bytes, timeout: float) -> HttpAnswer:
        """Send one complete request (`data`) and return its answer within `timeout` seconds.

        Raises:
            TransportError: connect failure, reset, malformed answer or timeout.
        """
        loop = asyncio.get_running_loop()
        pool = self._pool(loop)
        connection = pool.idle_connection()
        if connection is None:
            return await self._send_on_new(pool, data, timeout)
        pool.watch(connection, timeout)
        done = False
        try:
            result = await connection.request(data, loop)
            done = True
            return result
        except _NoAnswerInTime:
            raise
        except OSError as exc:
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            pool.busy.discard(connection)
            self._release(pool, connection, done)

    async def _send_on_new(self, pool: _Pool, data: bytes, timeout: float) -> HttpAnswer:
        """`send` when no idle connection is at hand: wait for one or connect, under its own timer."""
        loop = pool.loop
        task = asyncio.current_task(loop)
        timed_out = False

        def on_timeout() -> None:
            nonlocal timed_out
            timed_out = True
            if task is not None:
                task.cancel()

        timer = loop.call_later(timeout, on_timeout)
        connection: _Connection | None = None
        done = False
        try:
            connection = await self._acquire(pool)
            result = await connection.request(data, loop)
            done = True
            return result
        except asyncio.CancelledError:
            if timed_out:
                uncancel = getattr(task, "uncancel", None)
                if uncancel is not None:  # Python >= 3.11: this cancellation was ours, not the caller's
                    uncancel()
                raise TransportError(f"No answer within {timeout:g}s.") from None
            raise
        except OSError as exc:
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            timer.cancel()
            if connection is not None:
                self._release(pool, connection, done)

    async def close(self) -> None:
        """Close every pooled connection of every event loop."""
        with self._lock:
            pools = list(self._pools.values())
            self._pools.clear()
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for pool in pools:
            pool.closed = True  # connections still in use are closed when they are released
            connections, pool.idle = pool.idle, []
            for connection in connections:
                if pool.loop is current or pool.loop.is_closed():
                    connection.close()
                else:
                    try:
                        pool.loop.call_soon_threadsafe(connection.close)
                    except RuntimeError:  # the loop closed meanwhile
                        connection.close()


def build_request(method: str, target: str, host_header: str, headers: str, body: bytes | None) -> bytes:
    """Serialize one HTTP/1.1 request; `headers` holds extra ``Name: value\\r\\n`` lines."""
    head = f"{method} {target} HTTP/1.1\r\nHost: {host_header}\r\n{headers}"
    if body is None:
        return (head + "\r\n").encode("latin-1")
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1") + body
