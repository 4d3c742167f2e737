"""Open a store from a URI such as ``memory:``, ``sqlite:///path.db`` or ``http://host:port``.

Schemes come from the store registry: a store registered with ``schemes=[...]`` (see
``agl_register_stores``) opens URIs of those schemes through its ``from_uri`` classmethod.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from agl_core.registry import uri_scheme
from agl_core.store.base import LightningStore
from agl_core.store.errors import InvalidRequestError

__all__ = ["check_store_uri", "open_store", "open_store_for_reading", "parse_store_uri"]


def parse_store_uri(uri: str) -> str:
    """The lower-cased scheme of `uri` (``"sqlite"`` for ``sqlite:///x.db``).

    Raises:
        InvalidRequestError: `uri` has no scheme.
    """
    if not isinstance(uri, str):
        raise InvalidRequestError(f"A store URI must be a string, got {type(uri).__name__}.")
    scheme = uri_scheme(uri)
    if scheme is None:
        raise InvalidRequestError(
            f"Store URI {uri!r} has no scheme. Use e.g. 'memory:', 'sqlite:///path/to/store.db' or "
            "'http://host:port'."
        )
    return scheme


def open_store(uri: str, **kwargs: Any) -> LightningStore:
    """Open the store a URI names; ``kwargs`` go to the store's ``from_uri``.

    The store registry builds it (:meth:`agl_core.registry.Registry.create`), as ``Trainer(store=uri)`` does.

    Raises:
        InvalidRequestError: the URI has no scheme, or the store's URI parser refused it.
        UnknownComponentError: no installed store opens that scheme (the message lists the known
            schemes and, for first-party plugins, the package to install).
        ComponentSpecError: the store registered for the scheme built something that is not a
            `LightningStore` (a `TypeError`).
    """
    from agl_core.errors import AglError
    from agl_core.plugins import get_registries

    scheme = parse_store_uri(uri)
    try:
        if scheme in ("http", "https"):  # the client parses its URL only at the first request
            parts = urlsplit(uri)
            if not parts.hostname or parts.port == 0:
                raise ValueError("it names no host and port, e.g. http://127.0.0.1:4747")
        return get_registries().store.create(uri, **kwargs)
    except ValueError as exc:
        if isinstance(exc, AglError):
            raise
        # a URL parser's complaint ("Invalid IPv6 URL", a port that is not a number, ...)
        raise InvalidRequestError(f"Store URI {uri!r} is malformed: {exc}.") from exc


def check_store_uri(uri: str) -> None:
    """Fail now, without opening anything, when no installed store opens `uri`'s scheme.

    Raises:
        InvalidRequestError: the URI has no scheme.
        UnknownComponentError: no store opens the scheme.
    """
    from agl_core.plugins import get_registries

    get_registries().store.scheme_entry(parse_store_uri(uri))


def open_store_for_reading(uri: str) -> LightningStore:
    """Open a store for an inspection command: never create a store, never wait long for a server.

    A SQLite file must exist and is opened read-only; an HTTP server gets one quick try; other
    schemes open as :func:`open_store` does.
    """
    scheme = parse_store_uri(uri)
    if scheme == "sqlite":
        return open_store(uri, read_only=True)
    if scheme in ("http", "https"):
        return open_store(uri, retries=0, retry_timeout=0.0, timeout=10.0)
    return open_store(uri)
