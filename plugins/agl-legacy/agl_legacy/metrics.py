"""Compatibility module for Agent Lightning 0.3's ``agentlightning.utils.metrics``.

Listed in docs/migrating-from-agent-lightning.md. 0.3's small metrics API for application code: register
counters and histograms on a backend, then ``await inc_counter(...)`` / ``await observe_histogram(...)``.
`PrometheusMetricsBackend` forwards to ``prometheus_client``, `ConsoleMetricsBackend` logs rates and
percentiles over a sliding window, `MultiMetricsBackend` fans out to several. agl's own servers export
their metrics at ``GET /metrics`` (docs/metrics.md); its stores do not take a metrics ``tracker``.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = [
    "ConsoleMetricsBackend",
    "LabelDict",
    "LabelKey",
    "MetricsBackend",
    "MultiMetricsBackend",
    "PrometheusMetricsBackend",
    "get_prometheus_registry",
    "setup_multiprocess_prometheus",
    "shutdown_metrics",
]

# named by its 0.3 path, so logging set up for agl_core (or agentlightning) covers it
logger = logging.getLogger("agl_core.utils.metrics")

LabelDict = dict[str, str]
"""Metric labels: label name -> value."""

LabelKey = tuple[tuple[str, str], ...]
"""Metric labels as ``(name, value)`` pairs in registration order (a hashable key)."""

_multiproc_dir: tempfile.TemporaryDirectory[str] | None = None


@dataclass(frozen=True)
class _Metric:
    kind: str  # "counter" or "histogram"
    name: str
    label_names: tuple[str, ...]
    buckets: tuple[float, ...] = ()
    group_level: int | None = None


def _label_key(metric: _Metric, labels: LabelDict | None) -> LabelKey:
    given = labels or {}
    if set(given) != set(metric.label_names):
        raise ValueError(
            f"{metric.kind.capitalize()} '{metric.name}' expects labels {list(metric.label_names)}, "
            f"got {sorted(given)}."
        )
    return tuple((name, str(given[name])) for name in metric.label_names)


class MetricsBackend:
    """Where application metrics go: register each metric once, then record values (coroutines)."""

    def __init__(self) -> None:
        self._metrics: dict[str, _Metric] = {}
        self._register_lock = threading.Lock()

    def has_prometheus(self) -> bool:
        """Whether the metrics end up in ``prometheus_client`` (and so at a ``/metrics`` endpoint)."""
        return False

    def _register(self, metric: _Metric) -> bool:
        """Record the definition; False if already registered alike, `ValueError` if registered otherwise."""
        with self._register_lock:
            existing = self._metrics.get(metric.name)
            if existing is None:
                self._metrics[metric.name] = metric
                return True
        if existing.kind != metric.kind:
            raise ValueError(f"Metric '{metric.name}' already registered as {existing.kind}.")
        if (existing.label_names, existing.buckets) != (metric.label_names, metric.buckets):
            raise ValueError(
                f"{metric.kind.capitalize()} '{metric.name}' already registered with labels "
                f"{existing.label_names} and buckets {existing.buckets}."
            )
        return False

    def _metric(self, name: str, kind: str) -> _Metric:
        metric = self._metrics.get(name)
        if metric is None or metric.kind != kind:
            raise ValueError(f"{kind.capitalize()} '{name}' is not registered.")
        return metric

    def register_counter(
        self, name: str, label_names: Sequence[str] | None = None, group_level: int | None = None
    ) -> None:
        """Register a counter with these label names (their order is the grouping order)."""
        self._register(_Metric("counter", name, tuple(label_names or ()), group_level=group_level))

    def register_histogram(
        self,
        name: str,
        label_names: Sequence[str] | None = None,
        buckets: Sequence[float] | None = None,
        group_level: int | None = None,
    ) -> None:
        """Register a histogram with these label names and bucket bounds (None: the backend's default)."""
        self._register(
            _Metric(
                "histogram", name, tuple(label_names or ()), tuple(buckets or ()), group_level=group_level
            )
        )

    async def inc_counter(self, name: str, amount: float = 1.0, labels: LabelDict | None = None) -> None:
        """Add ``amount`` to a registered counter; `ValueError` for an unknown metric or wrong labels."""
        raise NotImplementedError

    async def observe_histogram(self, name: str, value: float, labels: LabelDict | None = None) -> None:
        """Record one value of a registered histogram; `ValueError` for an unknown metric or wrong labels."""
        raise NotImplementedError


class PrometheusMetricsBackend(MetricsBackend):
    """Forwards every metric to ``prometheus_client`` (dots in names become underscores).

    Args:
        registry: Where the metrics are registered; the default is ``prometheus_client``'s global one.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__()
        from prometheus_client import REGISTRY

        self._registry = registry if registry is not None else REGISTRY
        self._prometheus: dict[str, Any] = {}

    def has_prometheus(self) -> bool:
        """True."""
        return True

    def _register(self, metric: _Metric) -> bool:
        from prometheus_client import Counter, Histogram

        if not super()._register(metric):
            return False
        prom_name = metric.name.replace(".", "_")
        if metric.kind == "counter":
            created: Any = Counter(
                prom_name, f"Counter {metric.name}", metric.label_names, registry=self._registry
            )
        elif metric.buckets:
            created = Histogram(
                prom_name,
                f"Histogram {metric.name}",
                metric.label_names,
                registry=self._registry,
                buckets=metric.buckets,
            )
        else:
            created = Histogram(
                prom_name, f"Histogram {metric.name}", metric.label_names, registry=self._registry
            )
        self._prometheus[metric.name] = created
        return True

    def _child(self, metric: _Metric, labels: LabelDict | None) -> Any:
        key = _label_key(metric, labels)
        target = self._prometheus[metric.name]
        return target.labels(**dict(key)) if key else target

    async def inc_counter(self, name: str, amount: float = 1.0, labels: LabelDict | None = None) -> None:
        """Increment the Prometheus counter."""
        self._child(self._metric(name, "counter"), labels).inc(amount)

    async def observe_histogram(self, name: str, value: float, labels: LabelDict | None = None) -> None:
        """Observe the value in the Prometheus histogram."""
        self._child(self._metric(name, "histogram"), labels).observe(value)


@dataclass
class _Events:
    times: deque[float] = field(default_factory=deque)
    values: deque[float] = field(default_factory=deque)


def _format_duration(seconds: float) -> str:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.2f}{unit}"
    return f"{seconds * 1e9:.2f}ns"


def _percentile(ordered: list[float], fraction: float) -> float:
    position = fraction * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class ConsoleMetricsBackend(MetricsBackend):
    """Logs every metric's rate or P50/P95/P99 over a sliding window (``agl_legacy.metrics``, INFO).

    At most once per ``log_interval_seconds``, the next recorded value triggers one line with every metric:
    counters as ``name{labels}=<rate>/s``, histograms as ``name{labels}=<p50>,<p95>,<p99>`` (durations).
    Labels are cut to their first ``group_level`` names (the backend's, else the metric's) and values with the
    same cut labels are aggregated; None or < 1 aggregates all of a metric's values.

    Args:
        window_seconds: How far back the rates and percentiles look (None: everything kept).
        log_interval_seconds: Minimum seconds between two log lines.
        group_level: Label grouping depth for every metric (None: per-metric setting).
    """

    def __init__(
        self,
        window_seconds: float | None = 60.0,
        log_interval_seconds: float = 10.0,
        group_level: int | None = None,
    ) -> None:
        super().__init__()
        self.window_seconds = window_seconds
        self.log_interval_seconds = log_interval_seconds
        self.group_level = group_level
        self._events: dict[tuple[str, LabelKey], _Events] = {}
        self._lock = threading.Lock()
        self._last_log: float | None = None

    async def inc_counter(self, name: str, amount: float = 1.0, labels: LabelDict | None = None) -> None:
        """Record ``amount`` for the counter's rate."""
        self._record(self._metric(name, "counter"), amount, labels)

    async def observe_histogram(self, name: str, value: float, labels: LabelDict | None = None) -> None:
        """Record ``value`` for the histogram's percentiles."""
        self._record(self._metric(name, "histogram"), value, labels)

    def _record(self, metric: _Metric, value: float, labels: LabelDict | None) -> None:
        key = (metric.name, _label_key(metric, labels))
        now = time.time()
        with self._lock:
            events = self._events.setdefault(key, _Events())
            events.times.append(now)
            events.values.append(float(value))
            due = self._last_log is None or now - self._last_log >= self.log_interval_seconds
            if due:
                self._last_log = now
                line = self._snapshot(now)
        if due and line:
            logger.info(line)

    def _grouped(self, metric: _Metric, key: LabelKey) -> LabelKey:
        level = self.group_level if self.group_level is not None else metric.group_level
        return key[:level] if level is not None and level >= 1 else ()

    def _snapshot(self, now: float) -> str:
        groups: dict[tuple[str, LabelKey], tuple[list[float], float]] = {}
        for (name, key), events in self._events.items():
            if self.window_seconds is not None:
                while events.times and events.times[0] < now - self.window_seconds:
                    events.times.popleft()
                    events.values.popleft()
            if not events.times:
                continue
            group = (name, self._grouped(self._metrics[name], key))
            values, first = groups.get(group, ([], events.times[0]))
            values.extend(events.values)
            groups[group] = (values, min(first, events.times[0]))
        entries = []
        for (name, key), (values, first) in groups.items():
            label_text = "{" + ",".join(f"{k}={v}" for k, v in key) + "}" if key else ""
            if self._metrics[name].kind == "counter":
                start = first if self.window_seconds is None else max(first, now - self.window_seconds)
                duration = max(
                    now - start, self.log_interval_seconds if self.log_interval_seconds > 0 else 1e-3
                )
                entries.append(f"{name}{label_text}={sum(values) / duration:.2f}/s")
            else:
                ordered = sorted(values)
                stats = ",".join(_format_duration(_percentile(ordered, p)) for p in (0.5, 0.95, 0.99))
                entries.append(f"{name}{label_text}={stats}")
        return "  ".join(entries)


class MultiMetricsBackend(MetricsBackend):
    """Sends every registration and value to each of ``backends``."""

    def __init__(self, backends: Sequence[MetricsBackend]) -> None:
        super().__init__()
        if not backends:
            raise ValueError("MultiMetricsBackend needs at least one backend.")
        self.backends = list(backends)

    def has_prometheus(self) -> bool:
        """True if any backend forwards to Prometheus."""
        return any(backend.has_prometheus() for backend in self.backends)

    def register_counter(
        self, name: str, label_names: Sequence[str] | None = None, group_level: int | None = None
    ) -> None:
        """Register the counter on every backend."""
        for backend in self.backends:
            backend.register_counter(name, label_names, group_level)

    def register_histogram(
        self,
        name: str,
        label_names: Sequence[str] | None = None,
        buckets: Sequence[float] | None = None,
        group_level: int | None = None,
    ) -> None:
        """Register the histogram on every backend."""
        for backend in self.backends:
            backend.register_histogram(name, label_names, buckets, group_level)

    async def inc_counter(self, name: str, amount: float = 1.0, labels: LabelDict | None = None) -> None:
        """Increment the counter on every backend."""
        for backend in self.backends:
            await backend.inc_counter(name, amount, labels)

    async def observe_histogram(self, name: str, value: float, labels: LabelDict | None = None) -> None:
        """Observe the value on every backend."""
        for backend in self.backends:
            await backend.observe_histogram(name, value, labels)


def setup_multiprocess_prometheus() -> None:
    """Point ``PROMETHEUS_MULTIPROC_DIR`` at a fresh temporary directory unless it is already set.

    Call before ``prometheus_client`` is first imported: it decides then how it stores values.
    """
    global _multiproc_dir
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        logger.warning("PROMETHEUS_MULTIPROC_DIR is already set; wipe that directory between runs.")
        return
    _multiproc_dir = tempfile.TemporaryDirectory()
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = _multiproc_dir.name


def get_prometheus_registry() -> CollectorRegistry:
    """A registry of every process's metrics under ``PROMETHEUS_MULTIPROC_DIR``; else the global one."""
    from prometheus_client import REGISTRY, CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    if os.getenv("PROMETHEUS_MULTIPROC_DIR") is None:
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return registry


def shutdown_metrics(server: Any = None, worker: Any = None, *args: Any, **kwargs: Any) -> None:
    """Mark this process (or ``worker.pid``) dead in the directory `setup_multiprocess_prometheus` created.

    The signature fits gunicorn's ``child_exit`` hook, as in 0.3; a no-op without that directory.
    """
    if _multiproc_dir is None:
        return
    from prometheus_client import multiprocess

    pid = getattr(worker, "pid", None) or os.getpid()
    try:
        multiprocess.mark_process_dead(pid, _multiproc_dir.name)  # type: ignore[no-untyped-call]
    except OSError as exc:
        logger.error("Could not mark the metrics of process %d dead: %s", pid, exc)
