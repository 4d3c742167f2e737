"""A PostgreSQL outage while ``agl store serve`` runs is a 503 (clients retry), never a 500 (issue 34)."""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import urlsplit

from agl_postgres import PostgresLightningStore
from agl_postgres.testing import PgCluster

from agl_core.store.http import BackgroundServer


def _get(url: str, path: str) -> tuple[int, dict[str, object]]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_an_outage_answers_503_and_health_says_so(pg_cluster: PgCluster, schema: str) -> None:
    uri = f"{pg_cluster.uri}?schema={schema}&retry_timeout=1"
    with BackgroundServer(lambda: PostgresLightningStore.from_uri(uri)) as server:
        assert _get(server.endpoint, "/v1/agl/rollouts")[0] == 200
        pg_cluster.stop("fast")
        try:
            status, body = _get(server.endpoint, "/v1/agl/rollouts")
            assert status == 503, body
            deadline = time.monotonic() + 30  # /health reuses a probe result for a second
            health_status, health = 200, {}
            while health_status == 200 and time.monotonic() < deadline:
                health_status, health = _get(server.endpoint, "/health")
            assert health_status == 503 and health["status"] == "unhealthy", health
        finally:
            pg_cluster.start()
        assert _get(server.endpoint, "/v1/agl/rollouts")[0] == 200
