"""OTLP/HTTP trace intake: decode an ``ExportTraceServiceRequest`` and store its spans.

Agents in any language report with a stock OpenTelemetry exporter pointed at ``<store>/v1/traces``.
A span belongs to the rollout and attempt named by the attributes ``agentlightning.rollout_id`` and
``agentlightning.attempt_id`` (on the resource or on the span; the span wins), and optionally
``agentlightning.span_sequence_id``. Spans without both ids are dropped and counted in the answer's
``partial_success``. The spans are stored with one `add_many_spans` call, which numbers those without
a sequence id.

Both OTLP encodings are accepted: protobuf (``application/x-protobuf``) and OTLP/JSON
(``application/json``: lowerCamelCase keys, hex trace/span ids, int64 as numbers or strings), each
optionally gzip-compressed. protobuf and the OTLP proto package are imported only here.

Differences from Agent Lightning 0.3: JSON is accepted (0.3: protobuf only); ``Span.parent`` is filled
from the parent span id like an in-process span (0.3 left it None); ``kvlist`` attribute values are
flattened to dotted keys and mixed arrays JSON-encoded, because span attributes are primitives or
homogeneous lists; spans of unknown rollouts are rejected in ``partial_success`` instead of failing
the whole request.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from agl_core.store.base import LightningStore
from agl_core.store.errors import InvalidRequestError, NotFoundError
from agl_core.store.http.errors import UnsupportedMediaTypeError
from agl_core.store.logic import MAX_STORE_INT
from agl_core.types import Span

__all__ = [
    "ATTEMPT_ID_KEY",
    "MAX_OTLP_JSON_DEPTH",
    "ROLLOUT_ID_KEY",
    "SEQUENCE_ID_KEY",
    "IngestResult",
    "OtlpDecodeError",
    "decode_traces",
    "encode_traces_response",
    "ingest_spans",
]

logger = logging.getLogger(__name__)

ROLLOUT_ID_KEY = "agentlightning.rollout_id"
ATTEMPT_ID_KEY = "agentlightning.attempt_id"
SEQUENCE_ID_KEY = "agentlightning.span_sequence_id"
_STATUS_NAMES = {0: "UNSET", 1: "OK", 2: "ERROR"}
_STATUS_BY_TEXT = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_IS_REMOTE_KNOWN = 0x100
_IS_REMOTE = 0x200

MAX_OTLP_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects an OTLP/JSON body may have, checked before it is parsed.

A span sits 8 levels deep and each nested attribute value adds 3, so this leaves room for attribute
values nested 18 levels (the store keeps kvlists as dotted keys and other nesting as JSON text)."""

_UINT64 = 2**64 - 1
_INT64 = (-(2**63), 2**63 - 1)
_UINT32 = 2**32 - 1
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class OtlpDecodeError(InvalidRequestError):
    """The OTLP payload cannot be decoded (HTTP 400)."""


@dataclass
class _Decoded:
    """One span as read from the request, before ids are resolved."""

    attributes: dict[str, Any]
    resource_attributes: dict[str, Any]
    data: dict[str, Any]


@dataclass
class IngestResult:
    """Outcome of one export: spans stored, spans rejected and why."""

    accepted: int = 0
    rejected: int = 0
    reasons: list[str] = field(default_factory=list)

    def reject(self, count: int, reason: str) -> None:
        """Count `count` rejected spans with a reason (kept short for the answer)."""
        self.rejected += count
        if len(self.reasons) < 5:
            self.reasons.append(reason)


# ------------------------------------------------------------------------------------------- bodies


def decode_traces(body: bytes, content_type: str) -> tuple[list[_Decoded], bool]:
    """Decode an (already decompressed) export request; returns the spans and whether it was JSON.

    The server inflates ``Content-Encoding: gzip`` bodies before this (aiohttp does, within the body
    size limit, so a small compressed body cannot expand past it).

    Raises:
        UnsupportedMediaTypeError: neither protobuf nor JSON.
        OtlpDecodeError: the body does not parse.
    """
    media = content_type.split(";", 1)[0].strip().lower()
    if media not in ("application/x-protobuf", "application/json"):
        raise UnsupportedMediaTypeError(
            f"Content-Type {content_type or '(none)'!r} is not supported at /v1/traces; send OTLP as "
            "'application/x-protobuf' or 'application/json'."
        )
    if media == "application/json":
        return list(_decode_json(body)), True
    return list(_decode_protobuf(body)), False


# ------------------------------------------------------------------------------------------- attributes


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    """Store an attribute value as a span attribute: primitives, homogeneous lists, flattened maps."""
    if value is None:
        return
    if isinstance(value, dict):
        for sub_key, sub_value in value.items():
            _put(out, f"{key}.{sub_key}", sub_value)
    elif isinstance(value, list):
        kinds = {type(item) for item in value}
        if len(kinds) <= 1 and kinds <= {str, bool, int, float}:
            out[key] = value
        elif kinds == {int, float}:
            out[key] = [float(item) for item in value]
        else:
            out[key] = json.dumps(value, default=str)
    else:
        out[key] = value


# ------------------------------------------------------------------------------------------- protobuf


def _pb_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_pb_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _pb_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)


def _pb_attributes(pairs: Iterable[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in pairs:
        _put(out, kv.key, _pb_value(kv.value))
    return out


def _decode_protobuf(raw: bytes) -> Iterator[_Decoded]:
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(raw)
    except DecodeError as exc:
        raise OtlpDecodeError(f"Unable to parse the OTLP protobuf traces payload: {exc}.") from exc
    for resource_spans in request.resource_spans:
        resource_attrs = _pb_attributes(resource_spans.resource.attributes)
        resource = {"attributes": resource_attrs, "schema_url": resource_spans.schema_url}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                attributes = _pb_attributes(span.attributes)
                data = _span_data(
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_id=span.parent_span_id.hex(),
                    name=span.name,
                    trace_state=span.trace_state,
                    flags=span.flags,
                    start=span.start_time_unix_nano,
                    end=span.end_time_unix_nano,
                    status_code=span.status.code,
                    status_message=span.status.message,
                    attributes=attributes,
                    events=[(e.name, _pb_attributes(e.attributes), e.time_unix_nano) for e in span.events],
                    links=[
                        (
                            link.trace_id.hex(),
                            link.span_id.hex(),
                            link.trace_state,
                            link.flags,
                            _pb_attributes(link.attributes),
                        )
                        for link in span.links
                    ],
                    resource=resource,
                )
                yield _Decoded(attributes, resource_attrs, data)


# ------------------------------------------------------------------------------------------- JSON


def _get(obj: dict[str, Any], camel: str, snake: str, default: Any = None) -> Any:
    value = obj.get(camel)
    if value is None:
        value = obj.get(snake, default)
    return default if value is None else value


def _json_int(value: Any, field: str, low: int = 0, high: int = _UINT64) -> int:
    """An OTLP/JSON integer (a number or a decimal string) within ``[low, high]``, else a 400 naming it."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float):
        number = int(value) if math.isfinite(value) and value.is_integer() else None
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        number = int(value)
    if number is None or not low <= number <= high:
        raise OtlpDecodeError(
            f"{field} must be an integer from {low} to {high} (a JSON number or a decimal string), "
            f"got {value!r}."
        )
    return number


def _json_double(value: Any) -> float:
    """An OTLP/JSON ``doubleValue``: finite (the store keeps no NaN or Infinity), else a 400."""
    number = float(value)
    if not math.isfinite(number):
        raise OtlpDecodeError(
            f"doubleValue must be a finite number, got {value!r}; span attributes hold no NaN or Infinity."
        )
    return number


def _int_value(value: Any) -> int:
    return _json_int(value, "intValue", *_INT64)


def _check_json_depth(raw: bytes) -> None:
    """Refuse a body nested deeper than `MAX_OTLP_JSON_DEPTH`, before it is parsed.

    Strings are removed first (brackets inside them do not nest); then each pass strips the innermost
    ``[]``/``{}`` pairs, so a body is within the bound when the brackets are gone after that many passes.
    """
    brackets = raw.translate(None, _NOT_BRACKETS)
    if len(brackets) <= 2 * MAX_OTLP_JSON_DEPTH:
        return
    if b'"' in raw:
        brackets = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    for _ in range(MAX_OTLP_JSON_DEPTH):
        if not brackets:
            return
        stripped = brackets.replace(b"[]", b"").replace(b"{}", b"")
        if len(stripped) == len(brackets):
            return  # unbalanced: the parser reports it
        brackets = stripped
    if brackets:
        raise OtlpDecodeError(
            f"The OTLP/JSON body is nested more than {MAX_OTLP_JSON_DEPTH} levels deep; flatten the "
            "attribute values (kvlists of kvlists, arrays of arrays)."
        )


def _json_value(value: Any) -> Any:
    if not isinstance(value, dict):
        return None
    for key, convert in (
        ("stringValue", str),
        ("string_value", str),
        ("boolValue", bool),
        ("bool_value", bool),
        ("intValue", _int_value),
        ("int_value", _int_value),
        ("doubleValue", _json_double),
        ("double_value", _json_double),
    ):
        if key in value:
            return convert(value[key])
    array = _get(value, "arrayValue", "array_value")
    if array is not None:
        return [_json_value(v) for v in _get(array, "values", "values", [])]
    kvlist = _get(value, "kvlistValue", "kvlist_value")
    if kvlist is not None:
        return {kv["key"]: _json_value(kv.get("value")) for kv in _get(kvlist, "values", "values", [])}
    raw = _get(value, "bytesValue", "bytes_value")
    if raw is not None:
        return base64.b64decode(raw).hex()
    return None


def _json_attributes(pairs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in pairs or ():
        _put(out, str(kv["key"]), _json_value(kv.get("value")))
    return out


def _json_status_code(status: dict[str, Any]) -> int:
    code = status.get("code", 0)
    if isinstance(code, str):
        return (
            _STATUS_BY_TEXT.get(code, 0) if not code.isdigit() else _json_int(code, "status.code", 0, _UINT32)
        )
    return _json_int(code, "status.code", 0, _UINT32)


def _decode_json(raw: bytes) -> Iterator[_Decoded]:
    _check_json_depth(raw)
    try:
        document = json.loads(raw) if raw.strip() else {}
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise OtlpDecodeError(f"Unable to parse the OTLP/JSON traces payload: {exc}.") from exc
    try:
        yield from _walk_json(document)
    except OtlpDecodeError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise OtlpDecodeError(f"Malformed OTLP/JSON traces payload: {type(exc).__name__}: {exc}.") from exc


def _walk_json(document: Any) -> Iterator[_Decoded]:
    for resource_spans in _get(document, "resourceSpans", "resource_spans", []):
        resource_attrs = _json_attributes(_get(resource_spans, "resource", "resource", {}).get("attributes"))
        resource = {
            "attributes": resource_attrs,
            "schema_url": _get(resource_spans, "schemaUrl", "schema_url", ""),
        }
        scopes = _get(resource_spans, "scopeSpans", "scope_spans", None)
        if scopes is None:
            scopes = _get(resource_spans, "instrumentationLibrarySpans", "instrumentation_library_spans", [])
        for scope_spans in scopes:
            for span in _get(scope_spans, "spans", "spans", []):
                attributes = _json_attributes(span.get("attributes"))
                status = span.get("status") or {}
                data = _span_data(
                    trace_id=str(_get(span, "traceId", "trace_id", "")).lower(),
                    span_id=str(_get(span, "spanId", "span_id", "")).lower(),
                    parent_id=str(_get(span, "parentSpanId", "parent_span_id", "")).lower(),
                    name=str(span.get("name", "")),
                    trace_state=str(_get(span, "traceState", "trace_state", "")),
                    flags=_json_int(span.get("flags", 0), "flags", 0, _UINT32),
                    start=_json_int(
                        _get(span, "startTimeUnixNano", "start_time_unix_nano", 0), "startTimeUnixNano"
                    ),
                    end=_json_int(_get(span, "endTimeUnixNano", "end_time_unix_nano", 0), "endTimeUnixNano"),
                    status_code=_json_status_code(status),
                    status_message=status.get("message") or "",
                    attributes=attributes,
                    events=[
                        (
                            str(e.get("name", "")),
                            _json_attributes(e.get("attributes")),
                            _json_int(_get(e, "timeUnixNano", "time_unix_nano", 0), "events.timeUnixNano"),
                        )
                        for e in span.get("events") or ()
                    ],
                    links=[
                        (
                            str(_get(link, "traceId", "trace_id", "")).lower(),
                            str(_get(link, "spanId", "span_id", "")).lower(),
                            str(_get(link, "traceState", "trace_state", "")),
                            _json_int(link.get("flags", 0), "links.flags", 0, _UINT32),
                            _json_attributes(link.get("attributes")),
                        )
                        for link in span.get("links") or ()
                    ],
                    resource=resource,
                )
                yield _Decoded(attributes, resource_attrs, data)


# ------------------------------------------------------------------------------------------- spans


def _trace_state(text: str) -> dict[str, str]:
    state: dict[str, str] = {}
    for member in text.split(","):
        key, sep, value = member.strip().partition("=")
        if sep and key:
            state[key] = value
    return state


def _seconds(nanos: int) -> float | None:
    return nanos / 1e9 if nanos else None


def _span_data(
    *,
    trace_id: str,
    span_id: str,
    parent_id: str,
    name: str,
    trace_state: str,
    flags: int,
    start: int,
    end: int,
    status_code: int,
    status_message: str,
    attributes: dict[str, Any],
    events: list[tuple[str, dict[str, Any], int]],
    links: list[tuple[str, str, str, int, dict[str, Any]]],
    resource: dict[str, Any],
) -> dict[str, Any]:
    """The `Span` fields (without rollout, attempt and sequence ids) of one decoded OTLP span."""
    state = _trace_state(trace_state)
    parent_remote = bool(flags & _IS_REMOTE) if flags & _IS_REMOTE_KNOWN else False
    return {
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_id": parent_id or None,
        "name": name,
        "status": {
            "status_code": _STATUS_NAMES.get(status_code, "UNSET"),
            "description": status_message or None,
        },
        "attributes": attributes,
        "events": [{"name": n, "attributes": a, "timestamp": _seconds(t)} for n, a, t in events],
        "links": [
            {
                "context": {
                    "trace_id": t,
                    "span_id": s,
                    "is_remote": bool(f & _IS_REMOTE),
                    "trace_state": _trace_state(ts),
                },
                "attributes": a,
            }
            for t, s, ts, f, a in links
        ],
        "start_time": _seconds(start),
        "end_time": _seconds(end),
        "context": {"trace_id": trace_id, "span_id": span_id, "is_remote": False, "trace_state": state},
        "parent": (
            {"trace_id": trace_id, "span_id": parent_id, "is_remote": parent_remote, "trace_state": {}}
            if parent_id
            else None
        ),
        "resource": resource,
    }


def _tag(decoded: _Decoded, key: str) -> Any:
    value = decoded.attributes.get(key)
    return decoded.resource_attributes.get(key) if value is None else value


def _sequence_id(value: Any) -> int | None:
    """An explicit sequence id, or None ("allocate one") when absent, negative or not an integer."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, int) and value >= 0:
        return value
    return None


async def ingest_spans(store: LightningStore, decoded: list[_Decoded]) -> IngestResult:
    """Resolve ids and store the spans with `add_many_spans` (it numbers those without a sequence id)."""
    result = IngestResult()
    tagged: list[tuple[str, str, int | None, dict[str, Any]]] = []
    for item in decoded:
        rollout_id, attempt_id = _tag(item, ROLLOUT_ID_KEY), _tag(item, ATTEMPT_ID_KEY)
        if (
            not isinstance(rollout_id, str)
            or not rollout_id
            or not isinstance(attempt_id, str)
            or not attempt_id
        ):
            continue
        tagged.append((rollout_id, attempt_id, _sequence_id(_tag(item, SEQUENCE_ID_KEY)), item.data))
    untagged = len(decoded) - len(tagged)
    if untagged:
        logger.warning(
            "OTLP export: dropped %d span(s) without %s and %s attributes",
            untagged,
            ROLLOUT_ID_KEY,
            ATTEMPT_ID_KEY,
        )
        result.reject(untagged, f"{untagged} span(s) lack {ROLLOUT_ID_KEY}/{ATTEMPT_ID_KEY} attributes")
    spans: list[Span] = []
    for rollout_id, attempt_id, seq, data in tagged:
        if seq is not None and seq > MAX_STORE_INT:
            result.reject(1, f"span {data.get('span_id')!r}: {SEQUENCE_ID_KEY} {seq} exceeds 2**63-1")
            continue
        data["rollout_id"], data["attempt_id"] = rollout_id, attempt_id
        data["sequence_id"] = seq or 0  # 0: the store numbers it
        try:
            spans.append(Span.model_validate(data))
        except ValidationError as exc:
            result.reject(1, f"span {data.get('span_id')!r} is invalid: {exc.errors()[0].get('msg')}")
    if spans:
        result.accepted = await _store_spans(store, spans, result)
    return result


async def _store_spans(store: LightningStore, spans: list[Span], result: IngestResult) -> int:
    try:
        await store.add_many_spans(spans)
        return len(spans)
    except (NotFoundError, InvalidRequestError):
        pass
    # Salvage the groups whose rollout and attempt exist.
    groups: dict[tuple[str, str], list[Span]] = {}
    for span in spans:
        groups.setdefault((span.rollout_id, span.attempt_id), []).append(span)
    accepted = 0
    for (rollout_id, attempt_id), group in groups.items():
        try:
            await store.add_many_spans(group)
            accepted += len(group)
        except (NotFoundError, InvalidRequestError) as exc:
            logger.warning(
                "OTLP export: rejected %d span(s) of %s/%s: %s", len(group), rollout_id, attempt_id, exc
            )
            result.reject(len(group), str(exc))
    return accepted


def encode_traces_response(result: IngestResult, as_json: bool) -> bytes:
    """The ``ExportTraceServiceResponse`` for `result`, protobuf or OTLP/JSON."""
    message = "; ".join(result.reasons)
    if as_json:
        if not result.rejected:
            return b"{}"
        partial = {"rejectedSpans": str(result.rejected), "errorMessage": message}
        return json.dumps({"partialSuccess": partial}).encode()
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    response = ExportTraceServiceResponse()
    if result.rejected:
        response.partial_success.rejected_spans = result.rejected
        response.partial_success.error_message = message
    serialized: bytes = response.SerializeToString()  # protobuf's generated classes are untyped
    return serialized
