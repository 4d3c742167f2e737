"""JSON encode/decode for the proxy, on the standard library.

Compact JSON, ``bytes`` in and out so request and response bodies never take a detour through ``str``;
one encoder is reused instead of being built per call. ``NaN``, ``Infinity`` and integers beyond 64
bits, which some model servers emit, parse as Python does; :func:`dumps_str` (what the proxy records and
translates) writes non-finite numbers as ``null``, so a recorded call is always valid JSON for the store.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["MAX_DEPTH", "dumps", "dumps_str", "loads", "too_deep"]

MAX_DEPTH = 254
"""Deepest nesting of arrays and objects the proxy accepts in a body."""

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
_encode = _ENCODER.encode
_encode_finite = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), check_circular=False, allow_nan=False
).encode


def loads(data: bytes | str) -> Any:
    """Parse JSON text; raises ``ValueError`` when it is not valid JSON."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError(f"it is nested more than {MAX_DEPTH} levels deep") from None


def dumps(value: Any) -> bytes:
    """Serialize ``value`` to compact UTF-8 JSON bytes."""
    return _encode(value).encode()


def dumps_str(value: Any) -> str:
    """Serialize ``value`` to a compact JSON string, with ``NaN`` and infinities as ``null``."""
    try:
        return _encode_finite(value)
    except ValueError:  # a non-finite float somewhere: the rare case pays for one walk
        return _encode_finite(_finite(value))


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def too_deep(raw: bytes, value: Any) -> bool:
    """Whether ``value`` (parsed from ``raw``) nests deeper than :data:`MAX_DEPTH`.

    Costs two byte counts for ordinary bodies; a body with more than ``MAX_DEPTH`` brackets is walked.
    """
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return False
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
