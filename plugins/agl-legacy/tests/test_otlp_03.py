"""0.3's ``agentlightning.utils.otlp``: an OTLP/HTTP endpoint in your own app, and the store exporter.

Written like 0.3 code that mounts ``handle_otlp_export`` and builds its OpenTelemetry pipeline with
``LightningStoreOTLPExporter``; the OTLP client side is the real ``opentelemetry-exporter-otlp-proto-http``.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from google.rpc.status_pb2 import Status
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import agl_core as agl
from agl_core._compat import NotProvidedError
from agl_core.store.http import LightningStoreClient, LightningStoreServer
from agl_core.utils.otlp import PROTOBUF_CT, handle_otlp_export, spans_from_proto


def _emit(exporter: Any, *names: str, attributes: dict[str, Any] | None = None) -> None:
    """End one span per name through an SDK pipeline ending in ``exporter`` (blocking HTTP, so a thread)."""
    provider = TracerProvider(resource=Resource.create({"service.name": "my-agent"}), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("compat-test")
    for name in names:
        with tracer.start_as_current_span(name, attributes=attributes):
            pass


# ------------------------------------------------------------------------------------ handle_otlp_export


@pytest.fixture(params=[True, False], ids=["aiohttp-inflates", "raw-bodies"])
async def otlp_app(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[TestClient[Any, Any], agl.InMemoryLightningStore, list[Any]]]:
    """An aiohttp app with 0.3's OTLP routes: traces go to a store, metrics are accepted and dropped.

    Run with aiohttp's default body inflation and with ``auto_decompress=False`` (the handler inflates).
    """
    store = agl.InMemoryLightningStore()
    received: list[Any] = []

    async def on_traces(message: ExportTraceServiceRequest) -> None:
        received.append(message)
        await store.add_many_spans(await spans_from_proto(message, store.get_many_span_sequence_ids))

    async def traces(request: web.Request) -> web.Response:
        return await handle_otlp_export(
            request, ExportTraceServiceRequest, ExportTraceServiceResponse, on_traces, "traces"
        )

    async def metrics(request: web.Request) -> web.Response:
        return await handle_otlp_export(
            request, ExportMetricsServiceRequest, ExportMetricsServiceResponse, None, "metrics"
        )

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    app.router.add_post("/v1/metrics", metrics)
    async with TestClient(TestServer(app, host="127.0.0.1", auto_decompress=request.param)) as client:
        yield client, store, received


async def test_a_stock_exporter_stores_spans_through_handle_otlp_export(otlp_app: Any) -> None:
    client, store, received = otlp_app
    attempted = await store.start_rollout(input={"q": 1})
    ids = {
        "agentlightning.rollout_id": attempted.rollout_id,
        "agentlightning.attempt_id": attempted.attempt.attempt_id,
    }
    exporter = OTLPSpanExporter(endpoint=str(client.make_url("/v1/traces")), compression=Compression.Gzip)
    await asyncio.to_thread(_emit, exporter, "plan", "act", attributes=ids)
    assert len(received) == 2  # one export request per span (SimpleSpanProcessor)
    spans = await store.query_spans(attempted.rollout_id)
    assert [s.name for s in spans] == ["plan", "act"]
    assert [s.sequence_id for s in spans] == sorted(s.sequence_id for s in spans)
    assert spans[0].resource.attributes["service.name"] == "my-agent"


async def test_json_empty_and_compressed_requests(otlp_app: Any) -> None:
    client, _, received = otlp_app
    response = await client.post("/v1/traces", data=b"{}", headers={"Content-Type": "application/json"})
    assert response.status == 200 and response.content_type == "application/json"
    assert json.loads(await response.read()) == {}
    response = await client.post("/v1/traces", data=b"", headers={"Content-Type": PROTOBUF_CT})
    assert response.status == 200 and response.content_type == PROTOBUF_CT
    ExportTraceServiceResponse().ParseFromString(await response.read())
    assert [len(m.resource_spans) for m in received] == [0, 0]  # the callback saw two empty requests
    response = await client.post(
        "/v1/metrics",
        data=gzip.compress(ExportMetricsServiceRequest().SerializeToString()),
        headers={"Content-Type": PROTOBUF_CT, "Content-Encoding": "gzip", "Accept-Encoding": "gzip"},
    )
    assert response.status == 200 and response.headers["Content-Encoding"] == "gzip"


async def test_bad_requests_get_an_otlp_status_naming_the_problem(otlp_app: Any) -> None:
    client, _, received = otlp_app
    response = await client.post("/v1/traces", data=b"spans", headers={"Content-Type": "text/plain"})
    assert response.status == 415
    status = Status.FromString(await response.read())
    assert "text/plain" in status.message and PROTOBUF_CT in status.message
    response = await client.post("/v1/traces", data=b"\xff\xff\xff", headers={"Content-Type": PROTOBUF_CT})
    assert response.status == 400
    assert "Unable to parse the OTLP traces payload" in Status.FromString(await response.read()).message
    response = await client.post("/v1/traces", data=b"{", headers={"Content-Type": "application/json"})
    assert response.status == 400 and "traces" in json.loads(await response.read())["message"]
    response = await client.post(
        "/v1/traces", data=b"x", headers={"Content-Type": PROTOBUF_CT, "Content-Encoding": "snappy"}
    )
    assert response.status == 415 and "Content-Encoding" in Status.FromString(await response.read()).message
    assert received == []


# ------------------------------------------------------------------------------ LightningStoreOTLPExporter


@pytest.fixture
async def store_server() -> AsyncIterator[tuple[agl.InMemoryLightningStore, LightningStoreClient]]:
    store = agl.InMemoryLightningStore()
    server = LightningStoreServer(store, port=0)
    await server.start()
    client = LightningStoreClient(server.endpoint)
    try:
        yield store, client
    finally:
        await client.close()
        await server.stop()


async def test_store_exporter_files_spans_under_the_enabled_attempt(store_server: Any) -> None:
    from agl_core.utils.otlp import LightningStoreOTLPExporter

    store, client = store_server
    first, second = await store.start_rollout(input=1), await store.start_rollout(input=2)
    exporter = LightningStoreOTLPExporter()
    assert exporter.should_bypass() and exporter.rollout_id is None
    await asyncio.to_thread(_emit, exporter, "before")  # nothing enabled: dropped, not sent anywhere
    exporter.enable_store_otlp(client.otlp_traces_endpoint(), first.rollout_id, first.attempt.attempt_id)
    assert exporter.endpoint == client.otlp_traces_endpoint()
    assert f"rollout_id={first.rollout_id!r}" in repr(exporter)
    await asyncio.to_thread(_emit, exporter, "llm", "tool")
    exporter.enable_store_otlp(client.otlp_traces_endpoint(), second.rollout_id, second.attempt.attempt_id)
    await asyncio.to_thread(_emit, exporter, "second")
    exporter.disable_store_otlp()
    await asyncio.to_thread(_emit, exporter, "after")
    exporter.shutdown()
    spans = await store.query_spans(first.rollout_id)
    assert [(s.name, s.attempt_id) for s in spans] == [
        ("llm", first.attempt.attempt_id),
        ("tool", first.attempt.attempt_id),
    ]
    assert spans[0].resource.attributes["service.name"] == "my-agent"  # the app's resource is kept
    assert [s.name for s in await store.query_spans(second.rollout_id)] == ["second"]
    assert exporter.rollout_id is None and exporter.endpoint != client.otlp_traces_endpoint()


async def test_store_exporter_without_bypass_exports_to_its_own_endpoint(store_server: Any) -> None:
    from agl_core.utils.otlp import LightningStoreOTLPExporter

    class AlwaysExport(LightningStoreOTLPExporter):
        def should_bypass(self) -> bool:
            return False

    store, client = store_server
    attempted = await store.start_rollout(input=1)
    exporter = AlwaysExport(endpoint=client.otlp_traces_endpoint())
    ids = {
        "agentlightning.rollout_id": attempted.rollout_id,
        "agentlightning.attempt_id": attempted.attempt.attempt_id,
    }
    await asyncio.to_thread(_emit, exporter, "tagged-by-the-app", attributes=ids)
    exporter.shutdown()
    assert [s.name for s in await store.query_spans(attempted.rollout_id)] == ["tagged-by-the-app"]


def test_store_exporter_without_the_otlp_exporter_package_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import agl_core.utils.otlp as otlp

    monkeypatch.setitem(
        __import__("sys").modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None
    )
    with pytest.raises(NotProvidedError, match="pip install opentelemetry-exporter-otlp-proto-http"):
        otlp.LightningStoreOTLPExporter  # noqa: B018
