"""Metrics of `LightningStoreServer`: request latency per route, spans added, queue depth, rollouts by status.

Request latencies and spans added are counted as requests pass; the queue depth and the rollouts by
status are read from the store when ``/metrics`` is scraped (one ``query_rollouts(limit=1)`` per status,
which reads only the match count).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, get_args

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from agl_core.metrics.exposition import metrics_response
from agl_core.store.base import LightningStore
from agl_core.store.delegating import DelegatingLightningStore
from agl_core.types import Span
from agl_core.types.queries import AddSpans
from agl_core.types.status import RolloutStatus

__all__ = ["LATENCY_BUCKETS", "SpanCountingStore", "StoreServerMetrics"]

LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
"""Histogram buckets (seconds) of request latencies: sub-millisecond store calls up to long polls."""

_QUEUED: tuple[RolloutStatus, ...] = ("queuing", "requeuing")
_STATUSES: tuple[RolloutStatus, ...] = get_args(RolloutStatus)


class SpanCountingStore(DelegatingLightningStore):
    """Forwards everything to `store` and reports how many spans each add call stored to `on_spans`.

    Attributes the contract does not name (such as ``health_problem``) are read from `store`.
    """

    def __init__(self, store: LightningStore, on_spans: Callable[[int], None]) -> None:
        super().__init__()
        self.store = store
        self._on_spans = on_spans

    def __getattr__(self, name: str) -> Any:
        if name == "store":  # not set yet (during construction): avoid recursing
            raise AttributeError(name)
        return getattr(self.store, name)

    async def _insert_spans(self, request: AddSpans) -> Sequence[Span]:
        """Add the checked spans to the wrapped store and count the new ones."""
        stored = await self.store._insert_spans(request)
        self._on_spans(len(stored))
        return stored


class StoreServerMetrics:
    """The metrics of one store server, in a registry of their own.

    Series: ``agl_store_request_duration_seconds{route}`` (histogram, one route per API operation),
    ``agl_store_spans_added_total`` (counter; ``rate()`` of it is spans/s), ``agl_store_queue_depth``
    (rollouts queuing or requeuing) and ``agl_store_rollouts{status}`` (gauge per rollout status).
    """

    def __init__(self, store: LightningStore) -> None:
        self.store = store
        self.registry = CollectorRegistry(auto_describe=True)
        self.request_duration = Histogram(
            "agl_store_request_duration_seconds",
            "Time the store server took to answer a request, per API route.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.spans_added = Counter(
            "agl_store_spans_added",
            "Spans stored through this server (REST and OTLP); rate() gives spans per second.",
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "agl_store_queue_depth",
            "Rollouts waiting in the queue (status queuing or requeuing), read at scrape time.",
            registry=self.registry,
        )
        self.rollouts = Gauge(
            "agl_store_rollouts",
            "Rollouts in the store per status, read at scrape time.",
            ["status"],
            registry=self.registry,
        )

    def observer(self, route: str) -> Callable[[float], None]:
        """The function that records one request's duration (seconds) for `route`."""
        return self.request_duration.labels(route).observe

    def count_spans(self, count: int) -> None:
        """Add `count` stored spans to ``agl_store_spans_added_total``."""
        if count:
            self.spans_added.inc(count)

    async def refresh(self) -> None:
        """Read the queue depth and the rollouts per status from the store."""
        totals: dict[str, int] = {}
        for status in _STATUSES:
            totals[status] = (await self.store.query_rollouts(status_in=[status], limit=1)).total
        self.queue_depth.set(sum(totals[s] for s in _QUEUED))
        for status_name, total in totals.items():
            self.rollouts.labels(status_name).set(total)

    async def handle(self, request: web.Request) -> web.Response:
        """``GET /metrics``: the Prometheus text format, refreshed from the store first."""
        await self.refresh()
        return metrics_response(self.registry)
