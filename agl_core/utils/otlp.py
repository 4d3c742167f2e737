"""Compatibility module for Agent Lightning 0.3's ``agentlightning.utils.otlp``.

Listed in docs/migrating-from-agent-lightning.md. `spans_from_proto` turns an OTLP
``ExportTraceServiceRequest`` into agl `Span`s, as the store's own ``/v1/traces`` intake does. 0.3's FastAPI
request handler and its exporter are not provided: ``agl store serve`` accepts OTLP/HTTP at ``/v1/traces``
itself, and `OtelTracer` writes spans to any store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agl_core._compat import module_getattr
from agl_core.types import Span

__all__ = ["PROTOBUF_CT", "spans_from_proto"]

PROTOBUF_CT = "application/x-protobuf"
"""The content type of OTLP/HTTP protobuf requests and responses."""

_REASON = (
    "`agl store serve` accepts OTLP/HTTP at /v1/traces itself (agl_core.store.http.otlp), and "
    "OtelTracer writes spans to any store"
)

_DROPPED: dict[str, str] = dict.fromkeys(["LightningStoreOTLPExporter", "handle_otlp_export"], _REASON)

__getattr__ = module_getattr("agl_core.utils.otlp", {}, _DROPPED)


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
