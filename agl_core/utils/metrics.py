"""Compatibility module for Agent Lightning 0.3's ``agentlightning.utils.metrics``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__ = []

_NAMES: dict[str, Any] = {}

LabelDict = dict[str, str]
"""Metric labels: label name -> value."""

LabelKey = tuple[tuple[str, str], ...]
"""Metric labels as ``(name, value)`` pairs in registration order (a hashable key)."""

_REASON = (
    "agl has no metrics backends; read `await store.statistics()` (or GET /v1/agl/statistics on `agl "
    "store serve`) and the trainer's progress display"
)

_DROPPED: dict[str, str] = dict.fromkeys(
    [
        "ConsoleMetricsBackend",
        "MetricsBackend",
        "MultiMetricsBackend",
        "PrometheusMetricsBackend",
        "get_prometheus_registry",
        "setup_multiprocess_prometheus",
        "shutdown_metrics",
    ],
    _REASON,
)

__getattr__ = module_getattr("agl_core.utils.metrics", _NAMES, _DROPPED)
