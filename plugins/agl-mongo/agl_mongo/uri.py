"""Parsing of ``mongodb://`` / ``mongodb+srv://`` store URIs (database, partition, display form)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from agl_core.store import InvalidRequestError

__all__ = ["DEFAULT_DATABASE", "DEFAULT_PARTITION", "MongoUri", "parse_mongo_uri", "redact"]

DEFAULT_DATABASE = "agl"
"""Database used when neither the URI nor the caller names one."""
DEFAULT_PARTITION = "default"
"""Partition used when none is given: every store opened on the same database shares it."""

_SCHEMES = ("mongodb://", "mongodb+srv://")
_STORE_OPTIONS = ("database", "partition_id")


@dataclass(frozen=True)
class MongoUri:
    """A store URI split into what pymongo gets and the agl-only options it carried."""

    client_uri: str
    """The URI handed to pymongo (agl's own query options removed)."""
    database: str | None
    """``?database=`` if given, else the URI path, else None."""
    partition_id: str | None
    """``?partition_id=`` if given, else None."""


def parse_mongo_uri(uri: str) -> MongoUri:
    """Split a store URI: ``mongodb://host:port/DB?database=DB&partition_id=P&<pymongo options>``.

    ``database`` and ``partition_id`` are agl options removed before pymongo sees the URI; every
    other option is pymongo's. ``?database=`` wins over the path.

    Raises:
        InvalidRequestError: the URI is not a ``mongodb://`` or ``mongodb+srv://`` URI.
    """
    if not isinstance(uri, str) or not uri.lower().startswith(_SCHEMES):
        raise InvalidRequestError(
            f"Not a MongoDB store URI: {uri!r}. Use 'mongodb://host:27017/database' or "
            "'mongodb+srv://cluster.example.net/database'."
        )
    parts = urlsplit(uri)
    kept: list[tuple[str, str]] = []
    found: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in _STORE_OPTIONS:
            if not value:
                raise InvalidRequestError(f"Store URI option {key!r} is empty in {redact(uri)!r}.")
            found[key] = value
        else:
            kept.append((key, value))
    path_db = unquote(parts.path.lstrip("/")) or None
    client_uri = uri
    if found:  # rebuild only when agl options must go; otherwise pymongo gets the URI untouched
        client_uri = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(kept), parts.fragment))
    return MongoUri(client_uri, found.get("database", path_db), found.get("partition_id"))


def redact(uri: str) -> str:
    """`uri` with the password (if any) replaced by ``***``, for messages and logs."""
    parts = urlsplit(uri)
    netloc = parts.netloc
    if "@" not in netloc:
        return uri
    credentials, hosts = netloc.rsplit("@", 1)
    user = credentials.split(":", 1)[0]
    return urlunsplit((parts.scheme, f"{user}:***@{hosts}", parts.path, parts.query, parts.fragment))
