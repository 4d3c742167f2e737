"""Errors specific to the PostgreSQL store (the contract's own errors come from `agl_core.store`)."""

from __future__ import annotations

from agl_core.store import StoreError

__all__ = ["SchemaVersionError", "StoreUnavailableError"]


class StoreUnavailableError(StoreError, ConnectionError):
    """PostgreSQL could not be reached within ``retry_timeout`` seconds; `uri` names it (password hidden).

    The call that raised it may or may not have been applied; every call acknowledged before it is
    stored. Check the server, then retry the call or raise ``retry_timeout``.
    """

    def __init__(self, uri: str, waited: float, cause: str) -> None:
        self.uri = uri
        self.waited = waited
        super().__init__(
            f"PostgreSQL at {uri} is unreachable: {cause}. Retried for {waited:.1f}s (retry_timeout). "
            "Check that the server runs and the URI is right, or raise retry_timeout."
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_unavailable, (self.uri, self.waited, self.message))


def _rebuild_unavailable(uri: str, waited: float, message: str) -> StoreUnavailableError:
    error = StoreUnavailableError.__new__(StoreUnavailableError)
    error.uri, error.waited = uri, waited
    StoreError.__init__(error, message)
    return error


class SchemaVersionError(StoreError):
    """The schema was written by a newer agl-postgres, or the schema holds tables agl did not create."""
