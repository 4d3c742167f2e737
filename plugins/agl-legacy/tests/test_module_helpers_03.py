"""0.3's module-level helpers that live in agl-legacy, used the way 0.3 code used them."""

from __future__ import annotations

from pathlib import Path

import prometheus_client  # noqa: F401  (imported before any test sets PROMETHEUS_MULTIPROC_DIR, see below)
import pytest
from aiohttp.test_utils import TestClient, TestServer

from agl_core.cli.prometheus import create_prometheus_app, ensure_prometheus_dir
from agl_core.store.client_server import API_V1_AGL_PREFIX
from agl_core.store.collection.mongo import resolve_mongo_error_type


def test_store_api_prefix() -> None:
    assert API_V1_AGL_PREFIX == "/v1/agl"


def test_mongo_error_labels() -> None:
    from pymongo.errors import OperationFailure

    assert resolve_mongo_error_type(OperationFailure("no", code=11000)) == "OperationFailure-11000"
    assert resolve_mongo_error_type(RuntimeError("x")) is None


@pytest.mark.asyncio
async def test_prometheus_exporter_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # prometheus_client picks its value class when first imported: had that import happened with the
    # variable set, every later metric in this process would try to write multiprocess files.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "prom"))
    assert ensure_prometheus_dir() == str(tmp_path / "prom") and (tmp_path / "prom").is_dir()
    with pytest.raises(ValueError):
        create_prometheus_app("/")
    async with TestClient(TestServer(create_prometheus_app())) as client:
        assert (await client.get("/health")).status == 200
        response = await client.get("/v1/prometheus")
        assert response.status == 200 and response.content_type == "text/plain"


async def test_spans_from_proto_resolves_ids_like_the_store_intake() -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agl_core.utils.otlp import spans_from_proto

    exporter = InMemorySpanExporter()
    resource = Resource.create({"agentlightning.rollout_id": "ro-1", "agentlightning.attempt_id": "at-1"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with (
        tracer.start_as_current_span("outer"),
        tracer.start_as_current_span("inner", attributes={"agentlightning.span_sequence_id": 7}),
    ):
        pass
    asked: list[tuple[str, str]] = []

    async def issue(pairs: object) -> list[int]:
        asked.extend(pairs)  # type: ignore[arg-type]
        return [100 + i for i in range(len(asked))]

    spans = await spans_from_proto(encode_spans(exporter.get_finished_spans()), issue)
    assert [(s.name, s.rollout_id, s.attempt_id, s.sequence_id) for s in spans] == [
        ("inner", "ro-1", "at-1", 7),
        ("outer", "ro-1", "at-1", 100),
    ]
    assert asked == [("ro-1", "at-1")] and spans[0].parent_id == spans[1].span_id
