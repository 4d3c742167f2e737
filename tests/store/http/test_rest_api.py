"""The raw REST contract: status codes, JSON error bodies, routing, idempotent replay, CORS, OpenAPI."""

from __future__ import annotations

import gzip
import http.client
import json
from typing import Any
from urllib.parse import urlsplit

import pytest

from agl_core.dashboard import PAGE_PATHS
from agl_core.store.http import BackgroundServer
from agl_core.store.http.openapi import openapi_document
from agl_core.store.http.routes import ROUTES
from agl_core.store.memory import InMemoryLightningStore


def request(
    url: str,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> tuple[int, dict[str, str], Any]:
    """One HTTP request with the standard library; returns status, headers and the decoded JSON body."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, path, body=data, headers=all_headers)
        response = conn.getresponse()
        payload = response.read()
        decoded = (
            json.loads(payload) if payload and "json" in response.getheader("Content-Type", "") else payload
        )
        return response.status, {k.lower(): v for k, v in response.getheaders()}, decoded
    finally:
        conn.close()


def concrete(path: str) -> str:
    return (
        path.replace("{rollout_id}", "ro-missing")
        .replace("{attempt_id}", "at-missing")
        .replace("{worker_id}", "w-1")
        .replace("{resources_id}", "rs-missing")
    )


def test_health_routes(server: BackgroundServer) -> None:
    for path in ("/health", "/v1/agl/health"):
        status, _, body = request(server.endpoint, "GET", path)
        assert (status, body) == (200, {"status": "ok"})


def test_unknown_route_is_json_404(server: BackgroundServer) -> None:
    status, _, body = request(server.endpoint, "GET", "/v1/agl/nothing-here")
    assert status == 404
    assert body["error"]["type"] == "RouteNotFound"
    assert "/v1/agl/nothing-here" in body["error"]["message"]


def test_wrong_method_is_json_405_with_allow(server: BackgroundServer) -> None:
    status, headers, body = request(server.endpoint, "DELETE", "/v1/agl/rollouts")
    assert status == 405
    assert set(headers["allow"].split(", ")) == {"GET", "POST"}
    assert body["error"]["type"] == "MethodNotAllowed"


def test_malformed_json_is_400(server: BackgroundServer) -> None:
    status, _, body = request(server.endpoint, "POST", "/v1/agl/rollouts/search", raw=b"{not json")
    assert status == 400
    assert body["error"]["type"] == "InvalidJSONError"


def test_schema_mismatch_is_422_naming_the_field(server: BackgroundServer) -> None:
    status, _, body = request(server.endpoint, "POST", "/v1/agl/queues/rollouts/enqueue", {"rollouts": [{}]})
    assert status == 422
    assert body["error"]["type"] == "RequestValidationError"
    assert "rollouts.0.input" in body["error"]["message"]


def test_unknown_body_field_is_rejected(server: BackgroundServer) -> None:
    status, _, body = request(server.endpoint, "POST", "/v1/agl/queues/rollouts/dequeue", {"limt": 3})
    assert status == 422
    assert "limt" in body["error"]["message"]


def test_unknown_id_is_404_with_typed_error(server: BackgroundServer) -> None:
    status, _, body = request(server.endpoint, "POST", "/v1/agl/rollouts/ro-nope", {"status": "failed"})
    assert status == 404
    assert body["error"]["type"] == "RolloutNotFoundError"
    assert body["error"]["details"] == {"rollout_id": "ro-nope"}


def test_invalid_status_is_400_with_allowed_values(server: BackgroundServer) -> None:
    _, _, rollout = request(server.endpoint, "POST", "/v1/agl/rollouts", {"input": 1})
    status, _, body = request(
        server.endpoint, "POST", f"/v1/agl/rollouts/{rollout['rollout_id']}", {"status": "x"}
    )
    assert status == 400
    assert body["error"]["type"] == "InvalidStatusError"
    assert "succeeded" in body["error"]["details"]["allowed"]


def test_oversized_body_is_413(server: BackgroundServer) -> None:
    big = {"rollouts": [{"input": "x" * 1_200_000}]}
    status, _, body = request(server.endpoint, "POST", "/v1/agl/queues/rollouts/enqueue", big)
    assert status == 413
    assert body["error"]["type"] == "PayloadTooLargeError"
    # Nothing was enqueued and the server still works.
    status, _, page = request(server.endpoint, "GET", "/v1/agl/rollouts")
    assert (status, page["total"]) == (200, 0)


def test_oversized_gzip_otlp_body_is_413(server: BackgroundServer) -> None:
    bomb = gzip.compress(b"\0" * 3_000_000)  # small on the wire, over the limit once inflated
    status, _, body = request(
        server.endpoint,
        "POST",
        "/v1/traces",
        raw=bomb,
        headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
    )
    assert status == 413
    assert body["error"]["type"] == "PayloadTooLargeError"


def test_get_and_post_search_agree(server: BackgroundServer) -> None:
    request(
        server.endpoint,
        "POST",
        "/v1/agl/queues/rollouts/enqueue",
        {"rollouts": [{"input": i} for i in range(5)]},
    )
    status, _, got = request(server.endpoint, "GET", "/v1/agl/rollouts?status_in=queuing&limit=2&offset=1")
    assert status == 200
    _, _, posted = request(
        server.endpoint,
        "POST",
        "/v1/agl/rollouts/search",
        {"status_in": ["queuing"], "limit": 2, "offset": 1},
    )
    assert got == posted
    assert (got["total"], len(got["items"])) == (5, 2)


def test_enqueue_dequeue_status_codes_and_batches(server: BackgroundServer) -> None:
    status, _, created = request(
        server.endpoint,
        "POST",
        "/v1/agl/queues/rollouts/enqueue",
        {"rollouts": [{"input": i} for i in range(3)]},
    )
    assert status == 201 and [r["input"] for r in created] == [0, 1, 2]
    status, _, claimed = request(server.endpoint, "POST", "/v1/agl/queues/rollouts/dequeue", {"limit": 5})
    assert status == 200 and [r["input"] for r in claimed] == [0, 1, 2]
    assert all(r["attempt"]["sequence_id"] == 1 for r in claimed)
    status, _, nothing = request(server.endpoint, "POST", "/v1/agl/queues/rollouts/dequeue", {"limit": 0})
    assert (status, nothing) == (200, [])


def test_update_sends_only_present_fields_and_null_clears(server: BackgroundServer) -> None:
    _, _, started = request(server.endpoint, "POST", "/v1/agl/rollouts", {"input": 1, "metadata": {"a": 1}})
    rid = started["rollout_id"]
    _, _, updated = request(server.endpoint, "POST", f"/v1/agl/rollouts/{rid}", {"mode": "val"})
    assert updated["metadata"] == {"a": 1} and updated["mode"] == "val"
    _, _, cleared = request(server.endpoint, "POST", f"/v1/agl/rollouts/{rid}", {"metadata": None})
    assert cleared["metadata"] is None and cleared["mode"] == "val"


def test_idempotency_key_replays_the_first_answer(server: BackgroundServer) -> None:
    headers = {"Idempotency-Key": "key-1"}
    body = {"rollouts": [{"input": "once"}]}
    first = request(server.endpoint, "POST", "/v1/agl/queues/rollouts/enqueue", body, headers)
    second = request(server.endpoint, "POST", "/v1/agl/queues/rollouts/enqueue", body, headers)
    assert first[0] == second[0] == 201
    assert first[2] == second[2]
    _, _, page = request(server.endpoint, "GET", "/v1/agl/rollouts")
    assert page["total"] == 1  # the retry did not enqueue again
    request(server.endpoint, "POST", "/v1/agl/queues/rollouts/enqueue", body, {"Idempotency-Key": "key-2"})
    _, _, page = request(server.endpoint, "GET", "/v1/agl/rollouts")
    assert page["total"] == 2


def test_idempotent_dequeue_retry_gets_the_same_claim(server: BackgroundServer) -> None:
    request(
        server.endpoint, "POST", "/v1/agl/queues/rollouts/enqueue", {"rollouts": [{"input": 1}, {"input": 2}]}
    )
    headers = {"Idempotency-Key": "dq-1"}
    _, _, first = request(server.endpoint, "POST", "/v1/agl/queues/rollouts/dequeue", {}, headers)
    _, _, again = request(server.endpoint, "POST", "/v1/agl/queues/rollouts/dequeue", {}, headers)
    assert first == again
    _, _, other = request(server.endpoint, "POST", "/v1/agl/queues/rollouts/dequeue", {})
    assert other[0]["input"] == 2


def test_otlp_other_signals_are_501(server: BackgroundServer) -> None:
    for path in ("/v1/metrics", "/v1/logs", "/v1/development/profiles"):
        status, _, body = request(server.endpoint, "POST", path, raw=b"")
        assert status == 501
        assert body["error"]["type"] == "NotImplemented"


def test_cors_is_off_by_default(server: BackgroundServer) -> None:
    status, headers, _ = request(
        server.endpoint, "GET", "/v1/agl/health", headers={"Origin": "http://ui.example"}
    )
    assert status == 200
    assert "access-control-allow-origin" not in headers
    status, _, _ = request(
        server.endpoint,
        "OPTIONS",
        "/v1/agl/rollouts",
        headers={"Origin": "http://ui.example", "Access-Control-Request-Method": "GET"},
    )
    assert status == 405


def test_cors_allows_configured_origins_only() -> None:
    with BackgroundServer(InMemoryLightningStore, cors_origins=["http://ui.example"]) as served:
        status, headers, _ = request(
            served.endpoint, "GET", "/v1/agl/health", headers={"Origin": "http://ui.example"}
        )
        assert headers["access-control-allow-origin"] == "http://ui.example"
        status, headers, _ = request(
            served.endpoint,
            "OPTIONS",
            "/v1/agl/rollouts",
            headers={
                "Origin": "http://ui.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization",
            },
        )
        assert status == 200  # as Agent Lightning 0.3 answered a preflight
        assert "POST" in headers["access-control-allow-methods"]
        assert headers["access-control-allow-headers"] == "authorization"
        _, headers, _ = request(
            served.endpoint, "GET", "/v1/agl/health", headers={"Origin": "http://evil.example"}
        )
        assert "access-control-allow-origin" not in headers


def test_openapi_document_is_valid_openapi_3_1() -> None:
    from openapi_spec_validator import validate

    validate(json.loads(json.dumps(openapi_document())))


def test_openapi_document_matches_the_router(server: BackgroundServer) -> None:
    status, _, served = request(server.endpoint, "GET", "/v1/agl/openapi.json")
    assert status == 200
    assert served == json.loads(json.dumps(openapi_document()))
    documented = {(method.upper(), path) for path, ops in served["paths"].items() for method in ops}
    assert server.server is not None
    routed = {
        (route.method, route.resource.canonical)
        for route in server.server.app.router.routes()
        if route.resource is not None
        and route.method not in ("*", "HEAD")  # HEAD: health checks
        and route.resource.canonical not in PAGE_PATHS
        and route.resource.canonical != "/metrics"  # Prometheus text, not the JSON API (docs/metrics.md)
    }
    assert routed == documented
    assert routed == {(r.method, r.path) for r in ROUTES}
    # Every $ref points at a defined schema.
    text = json.dumps(served)
    for name in {part.split('"')[0] for part in text.split("#/components/schemas/")[1:]}:
        assert name in served["components"]["schemas"], name


@pytest.mark.parametrize(
    "route", [r for r in ROUTES if r.method == "GET" and "{" not in r.path], ids=lambda r: r.name
)
def test_every_plain_get_route_answers_json(server: BackgroundServer, route: Any) -> None:
    status, headers, _ = request(
        server.endpoint, "GET", concrete(route.path) + ("?rollout_id=ro-x" if "spans" in route.path else "")
    )
    assert status == 200, route.path
    assert headers["content-type"].startswith("application/json")


def test_ids_with_slashes_and_dots_round_trip(server: BackgroundServer) -> None:
    import asyncio

    from agl_core.store.http import LightningStoreClient

    async def main() -> None:
        client = LightningStoreClient(server.endpoint)
        try:
            for worker_id in ("a/b", "..", ".", "sp ace", "ü?#&"):
                worker = await client.update_worker(worker_id, heartbeat_stats={"n": 1})
                assert worker.worker_id == worker_id
                assert (await client.get_worker_by_id(worker_id)).worker_id == worker_id  # type: ignore[union-attr]
        finally:
            await client.close()

    asyncio.run(main())


def test_idempotency_keys_are_scoped_to_the_target(server: BackgroundServer) -> None:
    headers = {"Idempotency-Key": "same"}
    first = request(server.endpoint, "POST", "/v1/agl/workers/w-1", {"heartbeat_stats": {"n": 1}}, headers)
    second = request(server.endpoint, "POST", "/v1/agl/workers/w-2", {"heartbeat_stats": {"n": 2}}, headers)
    assert (first[2]["worker_id"], second[2]["worker_id"]) == ("w-1", "w-2")
