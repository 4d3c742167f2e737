"""Prometheus metrics of agl's servers (``GET /metrics`` on ``agl store serve`` and ``agl proxy serve``).

`agl_core.metrics.store_metrics.StoreServerMetrics` and `agl_core.metrics.proxy_metrics.ProxyServerMetrics`
each own a private ``prometheus_client`` registry, so several servers in one process never share
series. ``prometheus_client`` is imported only by those modules, never by ``import agl_core``. The
metric names are listed in docs/metrics.md.
"""

from __future__ import annotations

__all__: list[str] = []
