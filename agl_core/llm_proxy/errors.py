"""Errors of the LLM proxy and the OpenAI-style error bodies it answers with.

Every error the proxy sends to an agent is ``{"error": {"message", "type", "param", "code"}}`` with a
matching HTTP status, so OpenAI SDKs raise their usual typed exceptions (``BadRequestError``,
``AuthenticationError``, ``NotFoundError``, ``InternalServerError`` ...).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

import agl_core.llm_proxy._json as _json
from agl_core.errors import AglError

__all__ = [
    "BackendConfigError",
    "ProxyHTTPError",
    "error_body",
    "error_response",
    "normalize_upstream_error",
]


def _default_type(status: int) -> str:
    """The OpenAI error ``type`` conventionally used with ``status``."""
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    if status == 404:
        return "not_found_error"
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


class ProxyHTTPError(AglError):
    """An error answered to the agent as HTTP ``status`` with an OpenAI-style JSON body.

    The proxy raises it for bad requests (400), missing auth (401), unknown models (404), oversized
    bodies (413) and unreachable backends (502/504). In-process backends raise it to answer with a
    specific status; any other exception from them becomes a 500.

    Args:
        status: HTTP status code.
        message: Human-readable message: what was wrong and how to fix it.
        type: OpenAI error type; defaults from the status (``invalid_request_error``, ``server_error`` ...).
        code: Machine-readable code (``model_not_found``, ``invalid_api_key`` ...), or None.
        param: The request parameter at fault, or None.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str | None = None,
        code: str | int | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type or _default_type(status)
        self.code = code
        self.param = param

    @property
    def kind(self) -> str:
        """A short label of the error for records: the ``code`` when set, else the ``type``."""
        return str(self.code) if self.code is not None else self.type

    def body(self) -> dict[str, Any]:
        """The OpenAI-style error body."""
        return error_body(self.message, type=self.type, code=self.code, param=self.param)

    def response(self) -> web.Response:
        """This error as an aiohttp JSON response."""
        return error_response(self.status, self.message, type=self.type, code=self.code, param=self.param)


class BackendConfigError(AglError, ValueError):
    """A backend specification passed to the proxy cannot be used (bad URL, unknown option, ...)."""


def error_body(
    message: str, *, type: str = "server_error", code: str | int | None = None, param: str | None = None
) -> dict[str, Any]:
    """``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def error_response(
    status: int,
    message: str,
    *,
    type: str | None = None,
    code: str | int | None = None,
    param: str | None = None,
) -> web.Response:
    """An aiohttp response carrying an OpenAI-style error body."""
    body = error_body(message, type=type or _default_type(status), code=code, param=param)
    return web.Response(body=_json.dumps(body), status=status, content_type="application/json")


def normalize_upstream_error(status: int, body: bytes) -> bytes | None:
    """Return an OpenAI-style error body for a backend's error response, or None if ``body`` already is one.

    Backends answer errors in several shapes: OpenAI's ``{"error": {...}}`` (passed through unchanged),
    vLLM's flat ``{"object": "error", "message", "type", "param", "code"}``, FastAPI's ``{"detail": ...}``
    or plain text. The non-OpenAI shapes are wrapped so the agent's SDK can read them.
    """
    try:
        parsed: Any = _json.loads(body) if body else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        inner = parsed.get("error")
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return None
        message = parsed.get("message") or parsed.get("detail") or inner
        error_type = parsed.get("type") if isinstance(parsed.get("type"), str) else None
        code = parsed.get("code")
        param = parsed.get("param") if isinstance(parsed.get("param"), str) else None
    else:
        message, error_type, code, param = None, None, None, None
    if not isinstance(message, str):
        text = body.decode("utf-8", "replace").strip() if message is None else _json.dumps_str(message)
        message = text[:2000] or f"The model backend answered HTTP {status} with an empty body."
    if not isinstance(code, (str, int)) or isinstance(code, bool):
        code = None
    return _json.dumps(error_body(message, type=error_type or _default_type(status), code=code, param=param))
