"""Hostile HTTP input gets a 4xx JSON answer, never a 5xx; browsers cannot write cross-site (issue 20)."""

from __future__ import annotations

import logging

import pytest

from agl_core.store.http import BackgroundServer
from agl_core.store.memory import InMemoryLightningStore

from .conftest import TOKEN
from .test_rest_api import request

HUGE = str(2**63)


@pytest.mark.parametrize("query", [f"limit={HUGE}", f"offset={HUGE}"])
def test_integers_beyond_int64_get_400(server: BackgroundServer, query: str) -> None:
    status, _, body = request(server.endpoint, "GET", f"/v1/agl/rollouts?{query}")
    assert status == 400
    assert "2**63-1" in body["error"]["message"]


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]
)
def test_simple_cross_site_bodies_are_refused(server: BackgroundServer, content_type: str) -> None:
    status, _, body = request(
        server.endpoint,
        "POST",
        "/v1/agl/queues/rollouts/enqueue",
        raw=b'{"rollouts": [{"input": "x"}]}',
        headers={"Content-Type": content_type},
    )
    assert status == 415, body
    assert request(server.endpoint, "GET", "/v1/agl/statistics")[2]["total_rollouts"] == 0


def test_foreign_origin_cannot_write(server: BackgroundServer) -> None:
    status, _, body = request(
        server.endpoint,
        "POST",
        "/v1/agl/queues/rollouts/enqueue",
        {"rollouts": [{"input": "x"}]},
        headers={"Origin": "http://evil.example"},
    )
    assert status == 403 and body["error"]["type"] == "ForbiddenOrigin"


def test_host_header_is_checked_against_the_bound_address(server: BackgroundServer) -> None:
    status, _, body = request(server.endpoint, "GET", "/v1/agl/rollouts", headers={"Host": "evil.example"})
    assert status == 421, body
    assert request(server.endpoint, "GET", "/v1/agl/rollouts", headers={"Host": "localhost:1"})[0] == 200


def test_any_origin_cors_never_echoes_with_credentials() -> None:
    with BackgroundServer(InMemoryLightningStore, cors_origins=["*"]) as running:
        _, headers, _ = request(
            running.endpoint, "GET", "/v1/agl/rollouts", headers={"Origin": "http://evil.example"}
        )
    assert headers.get("access-control-allow-origin") == "*"
    assert "access-control-allow-credentials" not in headers


def test_head_health(server: BackgroundServer) -> None:
    assert request(server.endpoint, "HEAD", "/health")[0] == 200


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer"])
def test_bearer_scheme_is_case_insensitive(token_server: BackgroundServer, scheme: str) -> None:
    headers = {"Authorization": f"{scheme} {TOKEN}"}
    assert request(token_server.endpoint, "GET", "/v1/agl/rollouts", headers=headers)[0] == 200


def test_repeated_server_errors_log_one_traceback(caplog: pytest.LogCaptureFixture) -> None:
    from agl_core.store.http.guard import ErrorLogLimiter

    logger = logging.getLogger("agl.test.flood")
    limiter = ErrorLogLimiter(logger, window=3600)
    with caplog.at_level(logging.ERROR, logger="agl.test.flood"):
        for _ in range(1000):
            limiter.error(
                ("OverflowError", "/v1/agl/rollouts"), "GET %s failed", "/x", exc_info=OverflowError()
            )
    assert len(caplog.records) == 1
