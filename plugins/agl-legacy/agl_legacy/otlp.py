"""Compatibility module for Agent Lightning 0.3's ``agentlightning.utils.otlp``.

Listed in docs/migrating-from-agent-lightning.md. `spans_from_proto` turns an OTLP
``ExportTraceServiceRequest`` into agl `Span`s, as the store's own ``/v1/traces`` intake does;
`handle_otlp_export` answers an OTLP/HTTP export request in an **aiohttp** application (0.3: FastAPI);
`LightningStoreOTLPExporter` (loaded on first access; needs ``opentelemetry-exporter-otlp-proto-http``)
sends a rollout's spans to a store's ``/v1/traces``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from agl_core._compat import import_required, module_getattr
from agl_core.types import Span

if TYPE_CHECKING:
    from aiohttp import web
    from google.protobuf.message import Message  # type: ignore[import-untyped]

__all__ = ["PROTOBUF_CT", "handle_otlp_export", "spans_from_proto"]

PROTOBUF_CT = "application/x-protobuf"
"""The content type of OTLP/HTTP protobuf requests and responses."""

_JSON_CT = "application/json"

T_request = TypeVar("T_request", bound="Message")
T_response = TypeVar("T_response", bound="Message")


def _exporter_class() -> Any:
    import_required(
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
        "agl_legacy.otlp.LightningStoreOTLPExporter",
        "opentelemetry-exporter-otlp-proto-http",
    )
    from agl_legacy._otlp_exporter import LightningStoreOTLPExporter

    return LightningStoreOTLPExporter


__getattr__ = module_getattr("agl_legacy.otlp", {"LightningStoreOTLPExporter": _exporter_class})


def _status_body(message: str, as_json: bool) -> bytes:
    """A ``google.rpc.Status`` with only ``message`` set (OTLP's error body), protobuf or JSON."""
    if as_json:
        return json.dumps({"message": message}).encode()
    text = message.encode()
    length, prefix = len(text), bytearray(b"\x12")  # field 2 (message), length-delimited
    while length > 0x7F:
        prefix.append((length & 0x7F) | 0x80)
        length >>= 7
    prefix.append(length)
    return bytes(prefix) + text


def _error(status: int, message: str, as_json: bool) -> web.Response:
    from aiohttp import web

    body = _status_body(message, as_json)
    response = web.Response(body=body, status=status, content_type=_JSON_CT if as_json else PROTOBUF_CT)
    response.enable_compression()
    return response


def _still_compressed(body: bytes, encoding: str) -> bool:
    """Whether ``body`` still starts with a gzip or zlib header (aiohttp inflates bodies by default).

    A decoded OTLP body never does: protobuf cannot start with byte 0x1f and OTLP messages have no
    field 15, and JSON starts with ``{`` or whitespace.
    """
    if encoding in ("gzip", "x-gzip"):
        return body[:2] == b"\x1f\x8b"
    if encoding == "deflate" and len(body) >= 2:
        return body[0] & 0x0F == 8 and ((body[0] << 8) | body[1]) % 31 == 0
    return False


async def handle_otlp_export(
    request: web.Request,
    request_message_cls: type[T_request],
    response_message_cls: type[T_response],
    message_callback: Callable[[T_request], Awaitable[None]] | None,
    signal_name: str,
) -> web.Response:
    """Answer an OTLP/HTTP export request (``/v1/traces``, ``/v1/metrics``, ``/v1/logs``) in aiohttp.

    Parses the body (protobuf or OTLP/JSON) into ``request_message_cls`` (an empty body gives an empty
    message), awaits ``message_callback(message)`` and answers an empty ``response_message_cls`` in the
    request's encoding, compressed when the client accepts it. ``Content-Encoding: gzip``/``deflate``
    bodies are inflated by aiohttp, or here (within 32 MiB) when the app reads bodies raw; the app's
    ``client_max_size`` applies. Errors are answered with a ``google.rpc.Status`` body naming the problem:
    415 for another Content-Type or Content-Encoding, 413 for a body over the limit, 400 for one that does
    not parse. An exception of ``message_callback`` propagates (aiohttp answers 500).

    Differences from Agent Lightning 0.3 (FastAPI): OTLP/JSON is accepted too, and a wrong Content-Type
    gets 415 as the OTLP specification asks (0.3: 400).
    """
    from aiohttp import web
    from google.protobuf import json_format  # type: ignore[import-untyped]

    from agl_core.store.errors import InvalidRequestError
    from agl_core.store.http.body import CONTENT_ENCODINGS, inflate_body
    from agl_core.store.http.errors import PayloadTooLargeError
    from agl_core.store.http.server import DEFAULT_MAX_BODY_BYTES

    media = request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
    as_json = media == _JSON_CT
    if media not in (PROTOBUF_CT, _JSON_CT):
        return _error(
            415,
            f"Unsupported Content-Type {media or '(none)'!r} for OTLP {signal_name}; send {PROTOBUF_CT!r} "
            f"or {_JSON_CT!r}.",
            as_json=False,
        )
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in CONTENT_ENCODINGS:
        return _error(
            415,
            f"Content-Encoding {encoding!r} is not supported; send gzip, deflate or an uncompressed body.",
            as_json,
        )
    try:
        body = await request.read()
        if _still_compressed(body, encoding):  # the app reads bodies raw (auto_decompress=False)
            body = inflate_body(body, encoding, DEFAULT_MAX_BODY_BYTES)
    except web.HTTPRequestEntityTooLarge as exc:
        return _error(413, f"The OTLP {signal_name} request is too large: {exc.text}", as_json)
    except PayloadTooLargeError as exc:
        return _error(413, str(exc), as_json)
    except (InvalidRequestError, web.RequestPayloadError) as exc:
        return _error(400, str(exc), as_json)
    message = request_message_cls()
    if body.strip() if as_json else body:
        try:
            if as_json:
                json_format.Parse(body, message)
            else:
                message.ParseFromString(body)
        except Exception as exc:  # protobuf raises DecodeError, json_format ParseError
            return _error(400, f"Unable to parse the OTLP {signal_name} payload: {exc}", as_json)
    if message_callback is not None:
        await message_callback(message)
    reply = response_message_cls()
    payload = json_format.MessageToJson(reply).encode() if as_json else reply.SerializeToString()
    response = web.Response(body=payload, content_type=media)
    response.enable_compression()
    return response


def _sequence_id(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


async def spans_from_proto(
    request: Any,
    sequence_id_bulk_issuer: Callable[[Sequence[tuple[str, str]]], Awaitable[Sequence[int]]],
) -> list[Span]:
    """The spans of an ``ExportTraceServiceRequest``, with rollout, attempt and sequence ids resolved.

    Each span's ``agentlightning.rollout_id`` / ``attempt_id`` / ``span_sequence_id`` come from its own
    attributes, else from its resource's; spans without a rollout and attempt id are skipped (agl's intake
    drops them too). Missing sequence ids are issued in one call of ``sequence_id_bulk_issuer`` (e.g.
    ``store.get_many_span_sequence_ids``) with the ``(rollout_id, attempt_id)`` pairs in span order.
    """
    from agl_core.store.http.otlp import ATTEMPT_ID_KEY, ROLLOUT_ID_KEY, SEQUENCE_ID_KEY, decode_traces

    decoded, _ = decode_traces(request.SerializeToString(), PROTOBUF_CT)
    tagged: list[tuple[str, str, int | None, dict[str, Any]]] = []
    for item in decoded:

        def tag(key: str, item: Any = item) -> Any:
            value = item.attributes.get(key)
            return item.resource_attributes.get(key) if value is None else value

        rollout_id, attempt_id = tag(ROLLOUT_ID_KEY), tag(ATTEMPT_ID_KEY)
        if isinstance(rollout_id, str) and rollout_id and isinstance(attempt_id, str) and attempt_id:
            tagged.append((rollout_id, attempt_id, _sequence_id(tag(SEQUENCE_ID_KEY)), item.data))
    missing = [(rollout_id, attempt_id) for rollout_id, attempt_id, seq, _ in tagged if seq is None]
    issued = iter(await sequence_id_bulk_issuer(missing) if missing else ())
    spans: list[Span] = []
    for rollout_id, attempt_id, seq, data in tagged:
        data.update(
            rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=seq if seq is not None else next(issued)
        )
        spans.append(Span.model_validate(data))
    return spans
