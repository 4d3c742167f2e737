"""JSON encode/decode for the proxy's hot path: ``orjson`` when it is installed, else the stdlib.

Both paths produce compact JSON and accept/return ``bytes`` so request and response bodies never take a
detour through ``str``. The stdlib path reuses one encoder and one decoder instead of building them per
call. Install ``orjson`` for the proxy's full speed: recording parses every response and re-encodes
its messages and logprobs, which orjson does several times faster.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["BACKEND", "dumps", "dumps_str", "loads"]

_orjson: Any
try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised only where orjson is absent
    _orjson = None

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
_encode = _ENCODER.encode

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
            return json.loads(data)

    def dumps(value: Any) -> bytes:
        """Serialize ``value`` to compact UTF-8 JSON bytes."""
        try:
            return _orjson_dumps(value, option=_OPTS)
        except TypeError:  # integers beyond 64 bits
            return _encode(value).encode()

    def dumps_str(value: Any) -> str:
        """Serialize ``value`` to a compact JSON string."""
        try:
            return _orjson_dumps(value, option=_OPTS).decode()
        except TypeError:
            return _encode(value)

else:  # pragma: no cover

    def loads(data: bytes | str) -> Any:
        """Parse JSON text; raises ``ValueError`` when it is not valid JSON."""
        return json.loads(data)

    def dumps(value: Any) -> bytes:
        """Serialize ``value`` to compact UTF-8 JSON bytes."""
        return _encode(value).encode()

    def dumps_str(value: Any) -> str:
        """Serialize ``value`` to a compact JSON string."""
        return _encode(value)
