"""0.3's ``utils.metrics`` backends, used as 0.3 application code used them."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from agl_core.utils.metrics import (
    ConsoleMetricsBackend,
    MultiMetricsBackend,
    PrometheusMetricsBackend,
    get_prometheus_registry,
)


async def test_prometheus_backend_exports_counters_and_histograms() -> None:
    registry = CollectorRegistry()
    backend = PrometheusMetricsBackend(registry)
    backend.register_counter("app.requests", ["route"])
    backend.register_counter("app.requests", ["route"])  # the same registration again is fine
    backend.register_histogram("app.latency", ["route"], buckets=[0.1, 1.0])
    await backend.inc_counter("app.requests", labels={"route": "/a"})
    await backend.inc_counter("app.requests", 2, labels={"route": "/a"})
    await backend.observe_histogram("app.latency", 0.5, labels={"route": "/a"})
    text = generate_latest(registry).decode()
    assert 'app_requests_total{route="/a"} 3.0' in text
    assert 'app_latency_bucket{le="1.0",route="/a"} 1.0' in text
    with pytest.raises(ValueError, match="expects labels"):
        await backend.inc_counter("app.requests", labels={"path": "/a"})
    with pytest.raises(ValueError, match="not registered"):
        await backend.observe_histogram("app.requests", 1.0)
    with pytest.raises(ValueError, match="already registered"):
        backend.register_counter("app.requests", ["other"])
    assert backend.has_prometheus()


async def test_console_backend_logs_rates_and_percentiles(caplog: pytest.LogCaptureFixture) -> None:
    console = ConsoleMetricsBackend(window_seconds=None, log_interval_seconds=0.0, group_level=1)
    multi = MultiMetricsBackend([console])
    multi.register_counter("jobs", ["queue", "worker"])
    multi.register_histogram("job.time", ["queue"])
    with caplog.at_level(logging.INFO, logger="agl_core.utils.metrics"):
        await multi.inc_counter("jobs", labels={"queue": "q1", "worker": "w1"})
        await multi.inc_counter("jobs", labels={"queue": "q1", "worker": "w2"})
        for value in (0.001, 0.002, 0.003):
            await multi.observe_histogram("job.time", value, labels={"queue": "q1"})
    last = caplog.records[-1].getMessage()
    assert "jobs{queue=q1}=" in last and "/s" in last  # the two workers' counts aggregated at level 1
    assert "job.time{queue=q1}=2.00ms," in last
    assert not multi.has_prometheus()


def test_registry_is_the_global_one_without_multiprocess_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    from prometheus_client import REGISTRY

    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    assert get_prometheus_registry() is REGISTRY
