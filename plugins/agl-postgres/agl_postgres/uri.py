"""Parsing of ``postgresql://`` / ``postgres://`` store URIs: agl options, pool settings, display form.

``postgresql://user:password@host:5432/database?schema=agl&pool_max_size=20&...``: the agl options
(`STORE_OPTIONS`) are taken out of the query string; every other option (``sslmode=``,
``application_name=``, ...) is left for the driver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from agl_core.store import InvalidRequestError

__all__ = ["DEFAULTS", "STORE_OPTIONS", "PostgresSettings", "parse_postgres_uri", "redact"]

_SCHEMES = ("postgresql://", "postgres://")
_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

DEFAULTS: dict[str, Any] = {
    "schema": "agl",
    "pool_min_size": 1,
    "pool_max_size": 10,
    "connect_timeout": 10.0,
    "command_timeout": 60.0,
    "acquire_timeout": 60.0,
    "retry_timeout": 30.0,
}
"""Default of every store option (URI query or keyword argument)."""

STORE_OPTIONS: dict[str, type] = {
    "schema": str,
    "pool_min_size": int,
    "pool_max_size": int,
    "connect_timeout": float,
    "command_timeout": float,
    "acquire_timeout": float,
    "retry_timeout": float,
}
"""agl's options and their types; each may be given in the URI query or as a keyword argument."""


@dataclass(frozen=True)
class PostgresSettings:
    """A store URI split into the driver's DSN and agl's checked options."""

    dsn: str
    """The URI handed to the driver (agl's options removed; may hold the password: never print it)."""
    display_uri: str
    """The URI with its password hidden, for messages, logs and ``repr``."""
    options: dict[str, Any] = field(default_factory=dict)
    """Every key of `STORE_OPTIONS`, checked: URI query, overridden by keyword arguments, else `DEFAULTS`."""


def _coerce(name: str, value: Any, source: str) -> Any:
    kind = STORE_OPTIONS[name]
    try:
        if kind is str:
            if not isinstance(value, str):
                raise TypeError
            result: Any = value
        elif isinstance(value, bool):
            raise TypeError
        else:
            result = kind(value)
    except (TypeError, ValueError):
        raise InvalidRequestError(
            f"Store option {name!r} ({source}) must be a {kind.__name__}, got {value!r}."
        ) from None
    if name == "schema" and not _SCHEMA_RE.match(result):
        raise InvalidRequestError(
            "schema must be a lower-case SQL name (letters, digits, underscores; at most 63), "
            f"got {result!r}."
        )
    if kind is int and result < (0 if name == "pool_min_size" else 1):
        raise InvalidRequestError(f"Store option {name!r} ({source}) is too small: {result!r}.")
    if kind is float and not result > 0:
        raise InvalidRequestError(
            f"Store option {name!r} ({source}) must be a number of seconds > 0, got {result!r}."
        )
    return result


def parse_postgres_uri(uri: str, overrides: dict[str, Any] | None = None) -> PostgresSettings:
    """Split `uri` and merge `overrides` (keyword arguments win over the URI query).

    Raises:
        InvalidRequestError: not a ``postgresql://``/``postgres://`` URI, or a bad option value.
    """
    if not isinstance(uri, str) or not uri.lower().startswith(_SCHEMES):
        raise InvalidRequestError(
            f"Not a PostgreSQL store URI: {redact(uri) if isinstance(uri, str) else uri!r}. Use "
            "'postgresql://user:password@host:5432/database' (optionally '?schema=NAME')."
        )
    parts = urlsplit(uri)
    kept: list[tuple[str, str]] = []
    options = dict(DEFAULTS)
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in STORE_OPTIONS:
            options[key] = _coerce(key, value, "URI query")
        else:
            kept.append((key, value))
    for key, value in (overrides or {}).items():
        if key not in STORE_OPTIONS:
            raise InvalidRequestError(
                f"Unknown PostgreSQL store option {key!r}; known: {', '.join(STORE_OPTIONS)}."
            )
        if value is not None:
            options[key] = _coerce(key, value, "keyword argument")
    if options["pool_min_size"] > options["pool_max_size"]:
        raise InvalidRequestError(
            f"pool_min_size ({options['pool_min_size']}) must not exceed "
            f"pool_max_size ({options['pool_max_size']})."
        )
    dsn = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(kept), parts.fragment))
    return PostgresSettings(dsn=dsn, display_uri=redact(uri), options=options)


def redact(uri: str) -> str:
    """`uri` with the password (in the user part or a ``password=`` option) replaced by ``***``."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return "<unparsable URI>"
    netloc = parts.netloc
    if "@" in netloc:
        credentials, hosts = netloc.rsplit("@", 1)
        if ":" in credentials:
            netloc = f"{credentials.split(':', 1)[0]}:***@{hosts}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(key.lower() == "password" for key, _ in pairs):
            query = urlencode([(k, "***" if k.lower() == "password" else v) for k, v in pairs])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
