"""Errors of the HTTP store and their mapping to and from HTTP responses.

The server turns every exception into a status code and the JSON body
``{"error": {"type": <name>, "message": <text>, "details": {...}}}``; the client turns that body back
into the exception the local store would have raised (`RolloutNotFoundError` with its ``rollout_id``,
`InvalidStatusError` with its ``allowed`` values, ...). Caller mistakes are 4xx and are never retried;
5xx means a server fault.

```
StoreError
├── InvalidRequestError
│   ├── RequestValidationError   422: the body or parameters do not match the schema
│   │   └── InvalidJSONError     400: the body is not JSON
│   ├── UnsupportedMediaTypeError 415: wrong Content-Type / Content-Encoding (OTLP)
│   └── PayloadTooLargeError     413: the body is over the server's size limit
├── StoreAuthenticationError     401: missing or wrong bearer token (also a PermissionError)
├── StoreProtocolError           404/405 on an unknown route: client and server versions differ
├── StoreServerError             500: the server failed (also a RuntimeError)
└── StoreUnavailableError        connection errors / 502-504 until the retry budget ran out
                                 (also a ConnectionError)
```
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any

from agl_core.store.errors import (
    AttemptNotFoundError,
    InvalidArgumentTypeError,
    InvalidFilterError,
    InvalidRequestError,
    InvalidSpanError,
    InvalidStatusError,
    NotFoundError,
    ResourcesNotFoundError,
    RolloutNotFoundError,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
)

__all__ = [
    "InvalidJSONError",
    "PayloadTooLargeError",
    "RequestValidationError",
    "StoreAuthenticationError",
    "StoreProtocolError",
    "StoreServerError",
    "StoreUnavailableError",
    "UnsupportedMediaTypeError",
    "error_payload",
    "exception_from_payload",
    "status_for_exception",
]


class RequestValidationError(InvalidRequestError):
    """The request body or query parameters do not match the API schema (HTTP 400/422)."""

    def __init__(self, message: str, errors: list[dict[str, Any]] | None = None) -> None:
        self.errors = errors or []
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.errors))


class InvalidJSONError(RequestValidationError):
    """The request body is not valid JSON (HTTP 400)."""


class UnsupportedMediaTypeError(InvalidRequestError):
    """The Content-Type or Content-Encoding is not supported by the route (HTTP 415)."""


class PayloadTooLargeError(InvalidRequestError):
    """The request body exceeds the server's limit (HTTP 413); send smaller batches."""


class StoreAuthenticationError(StoreError, PermissionError):
    """The server requires a bearer token and the request had none or a wrong one (HTTP 401)."""


class StoreProtocolError(StoreError):
    """The server does not know the route or method (HTTP 404/405): client and server versions differ."""


class StoreServerError(StoreError, RuntimeError):
    """The server failed while handling the request (HTTP 500); the message names the server's error."""


class StoreUnavailableError(StoreError, ConnectionError):
    """The store server could not be reached (or answered 502-504) until the retry budget ran out."""


# --------------------------------------------------------------------------------------- server side

_STATUS_BY_TYPE: tuple[tuple[type[BaseException], int], ...] = (
    (NotFoundError, 404),
    (PayloadTooLargeError, 413),
    (UnsupportedMediaTypeError, 415),
    (InvalidJSONError, 400),
    (RequestValidationError, 422),
    (InvalidRequestError, 400),
    (StoreAuthenticationError, 401),
    (StoreClosedError, 503),
    (StoreCorruptError, 503),
)


def status_for_exception(exc: BaseException) -> int:
    """The HTTP status for an exception raised while handling a request (500 for anything unexpected).

    Store errors keep their meaning (unknown id -> 404, bad argument -> 400, closed -> 503). A plain
    `ValueError` is a bad argument by the store contract's convention (400). A backend that cannot be
    reached (a connection error or timeout) is 503, so clients retry; a full disk is 507. Everything
    else is a server fault.
    """
    for cls, status in _STATUS_BY_TYPE:
        if isinstance(exc, cls):
            return status
    if _disk_full(exc):
        return 507
    if isinstance(exc, ValueError):
        return 400
    if isinstance(exc, _OUTAGE) or isinstance(exc.__cause__, _OUTAGE):
        return 503
    return 500


_OUTAGE = (ConnectionError, TimeoutError)
"""A backend that cannot be reached or did not answer in time: 503, which clients retry."""


def _disk_full(exc: BaseException | None, depth: int = 0) -> bool:
    """Whether `exc` or an error it wraps says the disk is full: ENOSPC, SQLite's ``database or disk is
    full``, PostgreSQL's ``disk_full`` (SQLSTATE 53100)."""
    if exc is None or depth > 3:
        return False
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return True
    if "disk is full" in str(exc) or getattr(exc, "sqlstate", None) == "53100":
        return True
    return _disk_full(exc.__cause__ or exc.__context__, depth + 1)


def _details(exc: BaseException) -> dict[str, Any]:
    """The constructor arguments the client needs to rebuild `exc` as the same type."""
    if isinstance(exc, AttemptNotFoundError):
        return {"rollout_id": exc.rollout_id, "attempt_id": exc.attempt_id}
    if isinstance(exc, RolloutNotFoundError):
        return {"rollout_id": exc.rollout_id}
    if isinstance(exc, ResourcesNotFoundError):
        return {"resources_id": exc.resources_id}
    if isinstance(exc, InvalidStatusError):
        value = exc.value if isinstance(exc.value, (str, int, float, bool, type(None))) else repr(exc.value)
        return {"kind": exc.kind, "value": value, "allowed": list(exc.allowed)}
    if isinstance(exc, RequestValidationError):
        return {"errors": exc.errors}
    return {}


def error_payload(exc: BaseException, status: int) -> dict[str, Any]:
    """The JSON body describing `exc`: ``{"error": {"type", "message", "details"}}``."""
    if status == 507:
        message = (
            f"The store cannot write: its disk is full ({type(exc).__name__}: {exc}). Free space, then retry."
        )
        error_type = "InsufficientStorage"
    elif status == 503 and not isinstance(exc, StoreError):
        message = f"The store's backend is unavailable ({type(exc).__name__}: {exc}); retry later."
        error_type = "StoreUnavailable"
    elif status >= 500 and not isinstance(exc, StoreError):
        message = f"Internal server error: {type(exc).__name__}: {exc}"
        error_type = "InternalServerError"
    else:
        message = str(exc)
        error_type = type(exc).__name__
    return {"error": {"type": error_type, "message": message, "details": _details(exc)}}


# --------------------------------------------------------------------------------------- client side


def _rebuild_not_found(details: dict[str, Any], message: str, error_type: str) -> StoreError:
    if error_type == "AttemptNotFoundError":
        return AttemptNotFoundError(
            str(details.get("rollout_id", "")), str(details.get("attempt_id", "")), message
        )
    if error_type == "RolloutNotFoundError":
        return RolloutNotFoundError(str(details.get("rollout_id", "")), message)
    if error_type == "ResourcesNotFoundError":
        return ResourcesNotFoundError(str(details.get("resources_id", "")), message)
    return NotFoundError(message)


def _rebuild_status(details: dict[str, Any], message: str) -> StoreError:
    allowed = details.get("allowed")
    return InvalidStatusError(
        str(details.get("kind", "")),
        details.get("value"),
        allowed if isinstance(allowed, list) else [],
        message,
    )


_SIMPLE_TYPES: dict[str, Callable[[str], StoreError]] = {
    "InvalidRequestError": InvalidRequestError,
    "InvalidFilterError": InvalidFilterError,
    "InvalidSpanError": InvalidSpanError,
    "InvalidArgumentTypeError": InvalidArgumentTypeError,
    "PayloadTooLargeError": PayloadTooLargeError,
    "UnsupportedMediaTypeError": UnsupportedMediaTypeError,
    "StoreClosedError": StoreClosedError,
    "StoreAuthenticationError": StoreAuthenticationError,
}


def exception_from_payload(status: int, payload: object, url: str) -> StoreError:
    """Rebuild the typed exception the server described (`payload` is the decoded JSON body or None).

    Unknown error types fall back by status: 404 -> `NotFoundError` (or `StoreProtocolError` for an
    unknown route), 400/422 -> `InvalidRequestError`, 401 -> `StoreAuthenticationError`, 5xx ->
    `StoreServerError`.
    """
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        error = {}
    error_type = str(error.get("type") or "")
    message = str(error.get("message") or f"HTTP {status} from {url}")
    raw_details = error.get("details")
    details: dict[str, Any] = raw_details if isinstance(raw_details, dict) else {}
    if error_type.endswith("NotFoundError"):
        return _rebuild_not_found(details, message, error_type)
    if error_type == "InvalidStatusError":
        return _rebuild_status(details, message)
    if error_type in ("RequestValidationError", "InvalidJSONError"):
        errors = details.get("errors")
        cls = InvalidJSONError if error_type == "InvalidJSONError" else RequestValidationError
        return cls(message, errors if isinstance(errors, list) else None)
    simple = _SIMPLE_TYPES.get(error_type)
    if simple is not None:
        return simple(message)
    if status == 401:
        return StoreAuthenticationError(f"{message} (server {url}; pass token=... or set AGL_STORE_TOKEN)")
    if status in (404, 405):
        return StoreProtocolError(
            f"{message} ({url}). The server does not offer this route; are client and server the same "
            "agl version?"
        )
    if status == 413:
        return PayloadTooLargeError(message)
    if 400 <= status < 500:
        return InvalidRequestError(message)
    return StoreServerError(f"{message} (server {url})")
