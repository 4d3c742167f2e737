"""OTLP/HTTP trace intake: a stock exporter in another process, OTLP/JSON, gzip, bad payloads."""

from __future__ import annotations

import asyncio
import gzip
import json
import subprocess
import sys
import textwrap
from typing import Any

from agl_core.store.http import BackgroundServer, LightningStoreClient
from agl_core.types import AttemptedRollout

from ._support import child_env
from .conftest import TOKEN
from .test_rest_api import request

EXPORTER_SCRIPT = textwrap.dedent(
    """
    import sys
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    endpoint, token, rollout_id, attempt_id, other_attempt_id = sys.argv[1:6]
    headers = {"Authorization": f"Bearer {token}"}

    def provider(attributes):
        p = TracerProvider(resource=Resource.create(attributes))
        p.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=endpoint, headers=headers, compression=Compression.Gzip, timeout=10)))
        return p

    tagged = provider({"service.name": "agent", "agentlightning.rollout_id": rollout_id,
                       "agentlightning.attempt_id": attempt_id})
    tracer = tagged.get_tracer("agent")
    with tracer.start_as_current_span("agent.run") as root:
        root.set_attribute("task", "demo")
        with tracer.start_as_current_span("llm.call") as child:
            child.set_attribute("token_ids", [1, 2, 3])
            child.add_event("retry", {"attempt": 2})
        with tracer.start_as_current_span("moved") as moved:
            moved.set_attribute("agentlightning.attempt_id", other_attempt_id)
    untagged = provider({"service.name": "other"})
    with untagged.get_tracer("other").start_as_current_span("orphan"):
        pass
    for p in (tagged, untagged):
        assert p.force_flush(20_000)
        p.shutdown()
    print("exported")
    """
)


def _run(client_call: Any) -> Any:
    return asyncio.run(client_call)


async def _setup(url: str) -> tuple[AttemptedRollout, AttemptedRollout]:
    client = LightningStoreClient(url, token=TOKEN)
    try:
        first = await client.start_rollout("otlp")
        second = await client.start_attempt(first.rollout_id)
        return first, second
    finally:
        await client.close()


async def _spans(url: str, rollout_id: str, attempt_id: str | None = None) -> list[Any]:
    client = LightningStoreClient(url, token=TOKEN)
    try:
        return list(await client.query_spans(rollout_id, attempt_id))
    finally:
        await client.close()


def test_stock_exporter_in_another_process(token_server: BackgroundServer) -> None:
    first, second = _run(_setup(token_server.endpoint))
    rid, aid, other = first.rollout_id, first.attempt.attempt_id, second.attempt.attempt_id
    done = subprocess.run(
        [sys.executable, "-c", EXPORTER_SCRIPT, token_server.endpoint + "/v1/traces", TOKEN, rid, aid, other],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    spans = _run(_spans(token_server.endpoint, rid, aid))
    by_name = {s.name: s for s in spans}
    assert set(by_name) == {"agent.run", "llm.call"}
    assert by_name["llm.call"].parent_id == by_name["agent.run"].span_id
    assert by_name["llm.call"].trace_id == by_name["agent.run"].trace_id
    assert by_name["llm.call"].attributes["token_ids"] == [1, 2, 3]
    assert by_name["llm.call"].events[0].name == "retry"
    assert by_name["agent.run"].resource.attributes["service.name"] == "agent"
    moved = _run(_spans(token_server.endpoint, rid, other))
    assert [s.name for s in moved] == ["moved"]  # the span attribute overrides the resource's
    sequence_ids = sorted(s.sequence_id for s in [*spans, *moved])
    assert sequence_ids == [1, 2, 3]  # allocated in bulk, per rollout, no gaps
    assert _run(_spans(token_server.endpoint, rid))[0].sequence_id == 1
    stats = request(
        token_server.endpoint, "GET", "/v1/agl/statistics", headers={"Authorization": f"Bearer {TOKEN}"}
    )[2]
    assert stats["total_spans"] == 3  # the untagged span was dropped


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _json_request(rollout_id: str, attempt_id: str) -> dict[str, Any]:
    tagged = {
        "resource": {
            "attributes": [
                _attr("agentlightning.rollout_id", rollout_id),
                _attr("agentlightning.attempt_id", attempt_id),
            ]
        },
        "scopeSpans": [
            {
                "scope": {"name": "t"},
                "spans": [
                    {
                        "traceId": "5B8EFFF798038103D269B633813FC60C",
                        "spanId": "EEE19B7EC3C1B174",
                        "name": "explicit",
                        "startTimeUnixNano": "1700000000000000000",
                        "endTimeUnixNano": "1700000001000000000",
                        "kind": 1,
                        "attributes": [
                            _attr("agentlightning.span_sequence_id", 42),
                            {"key": "cfg", "value": {"kvlistValue": {"values": [_attr("depth", 2)]}}},
                        ],
                        "status": {"code": 2, "message": "boom"},
                    },
                    {
                        "traceId": "5b8efff798038103d269b633813fc60c",
                        "spanId": "eee19b7ec3c1b175",
                        "parentSpanId": "eee19b7ec3c1b174",
                        "name": "allocated",
                        "startTimeUnixNano": 1700000000500000000,
                    },
                ],
            }
        ],
    }
    untagged = {
        "resource": {"attributes": []},
        "scopeSpans": [
            {
                "spans": [
                    {
                        "traceId": "5b8efff798038103d269b633813fc60d",
                        "spanId": "0000000000000001",
                        "name": "orphan",
                    }
                ]
            }
        ],
    }
    unknown = {
        "resource": {
            "attributes": [
                _attr("agentlightning.rollout_id", "ro-unknown"),
                _attr("agentlightning.attempt_id", "at-unknown"),
            ]
        },
        "scopeSpans": [
            {
                "spans": [
                    {
                        "traceId": "5b8efff798038103d269b633813fc60e",
                        "spanId": "0000000000000002",
                        "name": "lost",
                    }
                ]
            }
        ],
    }
    return {"resourceSpans": [tagged, untagged, unknown]}


def test_json_encoded_export(token_server: BackgroundServer) -> None:
    first, _ = _run(_setup(token_server.endpoint))
    rid, aid = first.rollout_id, first.attempt.attempt_id
    status, headers, body = request(
        token_server.endpoint,
        "POST",
        "/v1/traces",
        _json_request(rid, aid),
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert status == 200 and headers["content-type"].startswith("application/json")
    assert body["partialSuccess"]["rejectedSpans"] == "2"  # one untagged, one of an unknown rollout
    spans = {s.name: s for s in _run(_spans(token_server.endpoint, rid, aid))}
    assert spans["explicit"].sequence_id == 42
    assert spans["allocated"].sequence_id == 43  # numbered by the store after the explicit 42, in order
    client = LightningStoreClient(token_server.endpoint, token=TOKEN)
    assert _run(client.get_next_span_sequence_id(rid, aid)) == 44
    assert spans["explicit"].span_id == "eee19b7ec3c1b174"
    assert spans["explicit"].status.status_code == "ERROR"
    assert spans["explicit"].attributes["cfg.depth"] == 2
    assert spans["explicit"].start_time == 1_700_000_000.0
    assert spans["allocated"].parent_id == "eee19b7ec3c1b174"


def test_gzip_protobuf_and_gzip_json(token_server: BackgroundServer) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
    from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

    first, _ = _run(_setup(token_server.endpoint))
    rid, aid = first.rollout_id, first.attempt.attempt_id
    tags = [
        KeyValue(key="agentlightning.rollout_id", value=AnyValue(string_value=rid)),
        KeyValue(key="agentlightning.attempt_id", value=AnyValue(string_value=aid)),
    ]
    span = PbSpan(
        trace_id=bytes(range(16)),
        span_id=bytes(range(8)),
        name="pb",
        start_time_unix_nano=1,
        attributes=[KeyValue(key="blob", value=AnyValue(bytes_value=b"\x01\xff"))],
    )
    message = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(resource={"attributes": tags}, scope_spans=[ScopeSpans(spans=[span])])]
    )
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Encoding": "gzip"}
    status, headers, raw = request(
        token_server.endpoint,
        "POST",
        "/v1/traces",
        raw=gzip.compress(message.SerializeToString()),
        headers={**auth, "Content-Type": "application/x-protobuf"},
    )
    assert status == 200 and headers["content-type"] == "application/x-protobuf"
    assert not ExportTraceServiceResponse.FromString(raw).HasField("partial_success")
    json_body = {"resourceSpans": _json_request(rid, aid)["resourceSpans"][:1]}
    status, _, body = request(
        token_server.endpoint,
        "POST",
        "/v1/traces",
        raw=gzip.compress(json.dumps(json_body).encode()),
        headers=auth,
    )
    assert (status, body) == (200, {})
    spans = {s.name: s for s in _run(_spans(token_server.endpoint, rid, aid))}
    assert spans["pb"].trace_id == bytes(range(16)).hex()
    assert spans["pb"].attributes["blob"] == "01ff"
    assert {"explicit", "allocated"} <= set(spans)


def test_bad_otlp_payloads_are_4xx(server: BackgroundServer) -> None:
    cases = [
        ({"Content-Type": "text/plain"}, b"hello", 415),
        ({"Content-Type": "application/x-protobuf"}, b"\xff\xff\xff", 400),
        ({"Content-Type": "application/json"}, b"{not json", 400),
        ({"Content-Type": "application/json"}, b'{"resourceSpans": [{"scopeSpans": 5}]}', 400),
        ({"Content-Type": "application/json", "Content-Encoding": "gzip"}, b"not gzip", 400),
        ({"Content-Type": "application/json", "Content-Encoding": "zstd-x"}, b"{}", 415),
    ]
    for headers, raw, expected in cases:
        status, _, body = request(server.endpoint, "POST", "/v1/traces", raw=raw, headers=headers)
        assert status == expected, (headers, raw, body)
        assert body["error"]["message"]
    status, _, body = request(
        server.endpoint, "POST", "/v1/traces", raw=b"", headers={"Content-Type": "application/json"}
    )
    assert (status, body) == (200, {})  # an empty export is valid
