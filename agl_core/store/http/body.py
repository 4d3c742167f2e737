"""Read an aiohttp request's body: size limit, then gzip/deflate inflation that never exceeds the limit.

The store API and agl-legacy's `handle_otlp_export` (0.3's `utils.otlp`) read bodies here. aiohttp is not
asked to decompress: the body is inflated in one bounded step, so a small compressed body cannot expand past
the limit.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Awaitable

from aiohttp import web

from agl_core.store.errors import InvalidRequestError
from agl_core.store.http.connections import CONNECTIONS, ConnectionTracker
from agl_core.store.http.errors import PayloadTooLargeError, UnsupportedMediaTypeError

__all__ = ["CONTENT_ENCODINGS", "inflate_body", "read_body"]

CONTENT_ENCODINGS = frozenset(("", "identity", "gzip", "x-gzip", "deflate"))
"""The ``Content-Encoding`` values a body may have."""


async def read_body(request: web.Request, max_body_bytes: int) -> bytes:
    """The request's body, inflated if it is gzip or deflate.

    Raises:
        UnsupportedMediaTypeError: another ``Content-Encoding`` (HTTP 415).
        PayloadTooLargeError: the body, or its inflated form, exceeds ``max_body_bytes`` (HTTP 413).
        InvalidRequestError: the body cannot be read or inflated (HTTP 400).
        web.HTTPRequestTimeout: the body did not arrive within the server's ``body_timeout`` (HTTP 408).
    """
    encoding = request.headers.get("Content-Encoding")
    if encoding is not None and encoding.strip().lower() not in CONTENT_ENCODINGS:
        raise UnsupportedMediaTypeError(
            f"Content-Encoding {encoding!r} is not supported; send gzip, deflate or an uncompressed body."
        )
    length = request.content_length
    if length is not None and length > max_body_bytes:
        raise PayloadTooLargeError(
            f"Request body of {length} bytes exceeds the server's limit of {max_body_bytes} bytes; "
            "send smaller batches (or raise --max-body-bytes)."
        )
    tracker = request.config_dict.get(CONNECTIONS)
    try:
        if length is not None:
            # Fast path: a small body has usually arrived with the headers.
            content = request.content
            data = content.read_nowait(length)
            if len(data) < length:
                data += await _within(content.readexactly(length - len(data)), tracker)
        else:
            data = await _within(request.read(), tracker)
        if tracker is not None:
            tracker.body_received(request)
        return inflate_body(data, encoding, max_body_bytes) if encoding is not None else data
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLargeError(
            f"Request body exceeds the server's limit of {max_body_bytes} bytes; send smaller "
            "batches (or raise --max-body-bytes)."
        ) from None
    except (web.RequestPayloadError, asyncio.IncompleteReadError, ConnectionError, RuntimeError) as exc:
        if isinstance(exc, RuntimeError) and "closed" not in str(exc).lower():
            raise
        # a broken body, or the connection closed under it (the client left, or the connection cap)
        error = InvalidRequestError(f"The request body could not be read: {' '.join(str(exc).split())}.")
        error.close_connection = True  # type: ignore[attr-defined]  # the parser cannot go on
        raise error from None


async def _within(read: Awaitable[bytes], tracker: ConnectionTracker | None) -> bytes:
    """`read`, bounded by the server's ``body_timeout`` (408 and a closed connection beyond it)."""
    if tracker is None:
        return await read
    try:
        return await asyncio.wait_for(read, tracker.body_timeout)
    except asyncio.TimeoutError:
        error = web.HTTPRequestTimeout(
            reason=f"The request body did not arrive within {tracker.body_timeout:g} s; send it at once "
            "(the server closes connections whose body trickles in)."
        )
        error.close_connection = True  # type: ignore[attr-defined]
        raise error from None


def inflate_body(data: bytes, encoding: str, max_body_bytes: int) -> bytes:
    """Decompress a gzip/deflate body (``identity``/empty: as is), never beyond ``max_body_bytes``."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return data
    wbits = 31 if name in ("gzip", "x-gzip") else 15
    try:
        inflater = zlib.decompressobj(wbits)
        out = inflater.decompress(data, max_body_bytes + 1)
    except zlib.error as exc:
        raise InvalidRequestError(
            f"The request body is not valid {name} data ({exc}); send it uncompressed or gzip it whole."
        ) from None
    if len(out) > max_body_bytes or inflater.unconsumed_tail:
        raise PayloadTooLargeError(
            f"The decompressed request body exceeds the server's limit of {max_body_bytes} bytes; "
            "send smaller batches (or raise --max-body-bytes)."
        )
    return out
