"""``emit_object`` and its reader: any JSON-serializable value (or bytes) as a span."""

from __future__ import annotations

import base64
import json
from typing import Any

from agl_core.emitter._resolve import extra_attributes, resolve_tracer
from agl_core.semconv import AGL_OBJECT, LightningSpanAttributes
from agl_core.tracer.base import get_active_tracer
from agl_core.types import SpanCoreFields, SpanLike, TraceStatus
from agl_core.utils.otel import full_qualified_name

__all__ = ["emit_object", "get_object_value"]

_TYPE = LightningSpanAttributes.OBJECT_TYPE.value
_LITERAL = LightningSpanAttributes.OBJECT_LITERAL.value
_JSON = LightningSpanAttributes.OBJECT_JSON.value


def _object_attributes(obj: Any) -> dict[str, Any]:
    if isinstance(obj, (str, bool, int, float)):
        return {_TYPE: _base_name(obj), _LITERAL: str(obj)}
    if isinstance(obj, (bytes, bytearray)):
        return {_TYPE: "bytes", _LITERAL: base64.b64encode(bytes(obj)).decode("ascii")}
    try:
        encoded = json.dumps(obj)
    except (TypeError, ValueError) as exc:
        raise RuntimeError(
            f"Object must be JSON serializable to be emitted; {full_qualified_name(type(obj))} is not "
            f"({exc}). Convert it first (e.g. model.model_dump(mode='json') or dataclasses.asdict)."
        ) from exc
    return {_TYPE: full_qualified_name(type(obj)), _JSON: encoded}


def _base_name(obj: Any) -> str:
    """The primitive type a subclass instance (an IntEnum, a str subclass) is stored as."""
    for kind in (bool, int, float, str):
        if isinstance(obj, kind):
            return kind.__name__
    return type(obj).__name__


def emit_object(
    object: Any, attributes: dict[str, Any] | None = None, propagate: bool = True
) -> SpanCoreFields:
    """Emit an ``agentlightning.object`` span holding ``object``.

    str/int/float/bool are stored as ``object.literal`` (``str(value)``) with ``object.type`` the type name;
    bytes as base64 with type ``"bytes"``; anything else as ``object.json`` with its fully qualified type
    name (builtins unqualified). Raises ``RuntimeError`` when the value is not JSON serializable.
    """
    attrs = {**extra_attributes(attributes), **_object_attributes(object)}
    tracer = resolve_tracer(propagate, "object span", get_active_tracer)
    return tracer.create_span(AGL_OBJECT, attributes=attrs, status=TraceStatus(status_code="OK"))


def get_object_value(span: SpanLike) -> Any:
    """The value stored by :func:`emit_object` (None when the span holds none).

    Raises ``RuntimeError`` for malformed JSON or an unknown literal type.
    """
    attributes = span.attributes or {}
    if _JSON in attributes:
        try:
            return json.loads(str(attributes[_JSON]))
        except json.JSONDecodeError as exc:
            raise RuntimeError(f"{_JSON} of span {span.name!r} is not valid JSON: {exc}") from exc
    if _LITERAL not in attributes:
        return None
    literal = str(attributes[_LITERAL])
    kind = attributes.get(_TYPE)
    if kind == "str":
        return literal
    if kind == "bool":
        return literal.lower() == "true"  # "True" as written, "true" from other writers (0.3 read both)
    if kind == "int":
        return int(literal)
    if kind == "float":
        return float(literal)
    if kind == "bytes":
        return base64.b64decode(literal)
    raise RuntimeError(
        f"Unknown {_TYPE} {kind!r} for a literal object span; expected str, int, float, bool or bytes."
    )


def encode_object(object: Any) -> dict[str, Any]:
    """The span attributes `emit_object` records for ``object`` (`RuntimeError` if not JSON-serializable)."""
    return _object_attributes(object)
