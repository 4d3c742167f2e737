"""Strong ETags of answers and the ``If-None-Match`` check (RFC 9110 section 13.1.2) of the server.

The server gives span-page answers a strong ETag (`agl_core.store.http.span_json`) and answers ``304 Not
Modified`` without a body when the request's ``If-None-Match`` names it; the client
(`agl_core.store.http.client`) keeps the decoded pages it got and revalidates them this way.
"""

from __future__ import annotations

import hashlib

__all__ = ["DIGEST_SIZE", "body_etag", "conditional_body", "none_match_hits"]

DIGEST_SIZE = 16
"""Bytes of the BLAKE2b digests behind an ETag (128 bits)."""


def body_etag(body: bytes) -> str:
    """A strong ETag (quoted) for any answer: the 128-bit BLAKE2b digest of the bytes themselves."""
    return f'"{hashlib.blake2b(body, digest_size=DIGEST_SIZE).hexdigest()}"'


def none_match_hits(header: str, etag: str) -> bool:
    """True when an ``If-None-Match`` header value names `etag` (or is ``*``), so 304 is the answer.

    The comparison is the weak one the RFC prescribes for ``If-None-Match``: ``W/"x"`` names ``"x"``.
    """
    if header == etag:
        return True
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate.startswith("W/"):
            candidate = candidate[2:]
        if candidate == etag or candidate == "*":
            return True
    return False


def conditional_body(body: bytes, if_none_match: str | None) -> tuple[bytes | None, str]:
    """`body` and its `body_etag`; the body is None when `if_none_match` names that ETag (answer 304)."""
    etag = body_etag(body)
    if if_none_match is not None and none_match_hits(if_none_match, etag):
        return None, etag
    return body, etag
