"""Compatibility module for Agent Lightning 0.3's ``agentlightning.utils.otlp``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__ = []

_NAMES: dict[str, Any] = {}

PROTOBUF_CT = "application/x-protobuf"
"""The content type of OTLP/HTTP protobuf requests and responses."""

_REASON = (
    "`agl store serve` accepts OTLP/HTTP at /v1/traces itself (agl_core.store.http.otlp), and "
    "OtelTracer writes spans to any store"
)

_DROPPED: dict[str, str] = dict.fromkeys(
    ["LightningStoreOTLPExporter", "handle_otlp_export", "spans_from_proto"], _REASON
)

__getattr__ = module_getattr("agl_core.utils.otlp", _NAMES, _DROPPED)
