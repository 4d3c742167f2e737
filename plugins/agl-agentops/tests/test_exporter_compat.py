"""The ``_headers`` incompatibility: detected exactly, repaired for AgentOps' own exporter, never silent."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import version

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from packaging.version import Version

from agl_agentops.compat import probe_agentops_exporter, repair_agentops_exporter

from .fake_agentops import TOKEN, FakeAgentOpsServer

OTLP_HTTP = Version(version("opentelemetry-exporter-otlp-proto-http"))


@pytest.fixture
def agentops_exporter_class() -> Iterator[type]:
    """AgentOps' exporter class, with its original ``export`` restored after the test."""
    from agentops.sdk.exporters import AuthenticatedOTLPExporter

    original = AuthenticatedOTLPExporter.__dict__["export"]
    yield AuthenticatedOTLPExporter
    AuthenticatedOTLPExporter.export = original  # type: ignore[method-assign]


def finished_spans(count: int) -> list:
    provider = TracerProvider()
    tracer = provider.get_tracer("compat-test")
    spans = []
    for index in range(count):
        span = tracer.start_span(f"span-{index}")
        span.end()
        spans.append(span)
    return spans


def test_the_probe_predicts_whether_agentops_exporter_delivers(agentops_exporter_class: type) -> None:
    probe = probe_agentops_exporter()
    assert probe.otlp_http_version == str(OTLP_HTTP) and probe.agentops_version == version("agentops")
    with FakeAgentOpsServer() as server:
        exporter = agentops_exporter_class(endpoint=server.traces_url, jwt_provider=lambda: TOKEN)
        result = exporter.export(finished_spans(2))
        exporter.shutdown()
        delivered = [s.name for s in server.spans]
    assert (result is SpanExportResult.SUCCESS) is probe.compatible
    assert (delivered == ["span-0", "span-1"]) is probe.compatible
    if Version("1.45") <= OTLP_HTTP:
        assert not probe.compatible and "_headers" in probe.detail
        assert "_headers" in probe.message()


def test_repair_makes_agentops_own_exporter_deliver_with_its_token(agentops_exporter_class: type) -> None:
    before = probe_agentops_exporter()
    after = repair_agentops_exporter()
    assert after.compatible
    assert after.repaired is (not before.compatible)
    with FakeAgentOpsServer() as server:
        exporter = agentops_exporter_class(endpoint=server.traces_url, jwt_provider=lambda: TOKEN)
        assert exporter.export(finished_spans(3)) is SpanExportResult.SUCCESS
        exporter.shutdown()
        assert [s.name for s in server.spans] == ["span-0", "span-1", "span-2"]
        assert {r.headers["Authorization"] for r in server.received} == {f"Bearer {TOKEN}"}


def test_a_repaired_exporter_without_a_token_fails_loudly_instead_of_sending_anonymously(
    agentops_exporter_class: type, caplog: pytest.LogCaptureFixture
) -> None:
    if probe_agentops_exporter().compatible:
        pytest.skip("the installed OpenTelemetry works with AgentOps' exporter; nothing is repaired")
    repair_agentops_exporter()
    with FakeAgentOpsServer() as server:
        exporter = agentops_exporter_class(endpoint=server.traces_url, jwt_provider=lambda: None)
        assert exporter.export(finished_spans(1)) is SpanExportResult.FAILURE
        exporter.shutdown()
        assert server.received == []
    assert "NOT delivered to AgentOps" in caplog.text and "not authenticated" in caplog.text
