"""Metrics of the LLM proxy: request latency per route, tokens, backend errors, recording counters.

Latencies are observed as requests pass; everything else is read at scrape time from the proxy's own
counters (`agl_core.llm_proxy.stats.ProxyStats` and each backend replica's counters), so the request
path pays for nothing but one histogram observation.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agl_core.metrics.exposition import metrics_response
from agl_core.metrics.store_metrics import LATENCY_BUCKETS

if TYPE_CHECKING:  # the proxy imports this module; its types are only annotations here
    from agl_core.llm_proxy.backends import BackendTable
    from agl_core.llm_proxy.stats import ProxyStats

__all__ = ["ProxyServerMetrics"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("requests", "agl_proxy_requests", "Requests answered by the proxy."),
    ("requests_failed", "agl_proxy_requests_failed", "Requests answered with HTTP >= 400."),
    ("backend_errors", "agl_proxy_backend_errors", "Answers with HTTP >= 500 caused by a backend."),
    ("retries", "agl_proxy_retries", "Retries on another replica after a connection failure."),
    ("prompt_tokens", "agl_proxy_prompt_tokens", "Prompt tokens in the usage of recorded answers."),
    (
        "completion_tokens",
        "agl_proxy_completion_tokens",
        "Completion tokens in the usage of recorded answers.",
    ),
    ("spans_written", "agl_proxy_spans_written", "LLM-call spans the store acknowledged."),
    ("spans_failed", "agl_proxy_spans_failed", "LLM-call spans the store rejected."),
    ("spans_dropped", "agl_proxy_spans_dropped", "LLM-call spans dropped (queue full or no store)."),
    ("store_errors", "agl_proxy_store_errors", "Failed store calls."),
)


class _StatsCollector(Collector):
    """Reads the proxy's counters when scraped."""

    def __init__(
        self, stats: ProxyStats, get_table: Callable[[], BackendTable], get_pending: Callable[[], int]
    ) -> None:
        self._stats = stats
        self._get_table = get_table
        self._get_pending = get_pending

    def collect(self) -> Iterator[Metric]:
        for attribute, name, documentation in _COUNTERS:
            yield CounterMetricFamily(name, documentation, value=getattr(self._stats, attribute))
        yield GaugeMetricFamily(
            "agl_proxy_spans_pending", "LLM-call spans waiting to be written.", value=self._get_pending()
        )
        failures = CounterMetricFamily(
            "agl_proxy_backend_connection_failures",
            "Connection failures per model backend (each cools the replica down).",
            labels=["model", "backend"],
        )
        in_flight = GaugeMetricFamily(
            "agl_proxy_backend_in_flight",
            "Requests in flight per model backend.",
            labels=["model", "backend"],
        )
        for model, pool in self._get_table().pools.items():
            for replica in pool.replicas:
                failures.add_metric([model, replica.label], replica.failures)
                in_flight.add_metric([model, replica.label], replica.in_flight)
        yield failures
        yield in_flight


class ProxyServerMetrics:
    """The metrics of one running proxy, in a registry of their own (see docs/metrics.md for the names)."""

    def __init__(
        self, stats: ProxyStats, get_table: Callable[[], BackendTable], get_pending: Callable[[], int]
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.request_duration = Histogram(
            "agl_proxy_request_duration_seconds",
            "Time the proxy took to answer a request (to the end of a stream), per route.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_StatsCollector(stats, get_table, get_pending))

    def timed(self, route: str, handler: Handler) -> Handler:
        """`handler`, recording each call's duration under ``route``."""
        observe = self.request_duration.labels(route).observe
        clock = time.perf_counter

        async def timed_handler(request: web.Request) -> web.StreamResponse:
            started = clock()
            try:
                return await handler(request)
            finally:
                observe(clock() - started)

        return timed_handler

    async def handle(self, request: web.Request) -> web.Response:
        """``GET /metrics``: the Prometheus text format."""
        return metrics_response(self.registry)
