"""JSON encode/decode for the proxy's hot path: ``orjson`` when it is installed, else the stdlib.

Both paths produce compact JSON and accept/return ``bytes`` so request and response bodies never take a
detour through ``str``. The stdlib path reuses one encoder and one decoder instead of building them per
call. Install ``orjson`` for the proxy's full speed: recording parses every response and re-encodes
its messages and logprobs, which orjson does several times faster.
"""

from __future__ import annotations

import json
from typing import Any, cast

__all__ = ["BACKEND", "MAX_DEPTH", "dumps", "dumps_str", "loads", "too_deep"]

MAX_DEPTH = 254
"""Deepest nesting of arrays and objects the proxy accepts in a body (what orjson can re-serialize)."""

_orjson: Any
try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised only where orjson is absent
    _orjson = None

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
_encode = _ENCODER.encode


def _stdlib_loads(data: bytes | str) -> Any:
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError(f"it is nested more than {MAX_DEPTH} levels deep") from None


def too_deep(raw: bytes, value: Any) -> bool:
    """Whether ``value`` (parsed from ``raw``) nests deeper than :data:`MAX_DEPTH`.

    Costs two byte counts for ordinary bodies; a body with more than ``MAX_DEPTH`` brackets is re-encoded
    by orjson (whose limit is the same) or, without orjson, walked iteratively.
    """
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return False
    if _orjson is not None:
        try:
            _orjson.dumps(value, option=_orjson.OPT_NON_STR_KEYS)
            return False
        except TypeError as exc:  # orjson.JSONEncodeError
            if "ecursion" in str(exc):
                return True  # otherwise (integers beyond 64 bits) walk
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values() if isinstance(child, (dict, list)))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item if isinstance(child, (dict, list)))
    return False


BACKEND = "orjson" if _orjson is not None else "json"
"""Which library serves this module (``"orjson"`` or ``"json"``)."""

if _orjson is not None:
    _OPTS = _orjson.OPT_NON_STR_KEYS
    _orjson_loads = _orjson.loads
    _orjson_dumps = _orjson.dumps
    _DecodeError = _orjson.JSONDecodeError

    def loads(data: bytes | str) -> Any:
        """Parse JSON text; raises ``ValueError`` when it is not valid JSON.

        Falls back to the stdlib for what orjson rejects but Python accepts (``NaN``, ``Infinity``,
        integers beyond 64 bits), so model servers that emit those still parse.
        """
        try:
            return _orjson_loads(data)
        except _DecodeError:
            return _stdlib_loads(data)

    def dumps(value: Any) -> bytes:
        """Serialize ``value`` to compact UTF-8 JSON bytes."""
        try:
            return cast(bytes, _orjson_dumps(value, option=_OPTS))
        except TypeError:  # integers beyond 64 bits
            return _encode(value).encode()

    def dumps_str(value: Any) -> str:
        """Serialize ``value`` to a compact JSON string."""
        try:
            return cast(bytes, _orjson_dumps(value, option=_OPTS)).decode()
        except TypeError:
            return _encode(value)

else:  # pragma: no cover

    def loads(data: bytes | str) -> Any:
        """Parse JSON text; raises ``ValueError`` when it is not valid JSON."""
        return _stdlib_loads(data)

    def dumps(value: Any) -> bytes:
        """Serialize ``value`` to compact UTF-8 JSON bytes."""
        return _encode(value).encode()

    def dumps_str(value: Any) -> str:
        """Serialize ``value`` to a compact JSON string."""
        return _encode(value)
