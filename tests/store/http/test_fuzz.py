"""Property-based fuzzing of every route: random and malformed bodies, parameters and ids never give a
5xx or take the server down; errors are always a JSON ``{"error": ...}`` body.

Input classes include NUL characters, import targets (``os:abort``), deep nesting, out-of-range OTLP
numbers and over-long URLs (issue 34)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from agl_core.store.http import BackgroundServer
from agl_core.store.http.routes import ROUTES, Route
from agl_core.store.memory import InMemoryLightningStore
from agl_core.store.sqlite import SqliteLightningStore

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.sampled_from(["a\x00b", "\x00", "os:abort", "sys.exit"]),  # NUL text, import targets (issue 34)
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _fields(route: Route) -> list[str]:
    for model in (route.body, route.query):
        if isinstance(model, type) and issubclass(model, BaseModel):
            return list(model.model_fields)
    return []


def _bodies(route: Route) -> st.SearchStrategy[bytes]:
    names = _fields(route)
    guided = (
        st.fixed_dictionaries({}, optional={name: json_values for name in names}) if names else json_values
    )
    return st.one_of(
        guided.map(lambda value: json.dumps(value).encode()),
        json_values.map(lambda value: json.dumps(value).encode()),
        st.binary(max_size=64),
        st.just(b""),
        st.just(b'{"a": NaN, "timeout": Infinity}'),
        st.just(b"[" * 5_000 + b"]" * 5_000),  # deep nesting (issue 34)
        st.just(
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "s", "startTimeUnixNano": 1e400, '
            b'"flags": -Infinity, "events": [{"timeUnixNano": 1e400}]}]}]}]}'
        ),  # out-of-range OTLP numbers (issue 34)
    )


def _queries(route: Route) -> st.SearchStrategy[str]:
    names = [*_fields(route), "junk"]
    values = st.text(max_size=10) | st.sampled_from(["a\x00b", "os:abort", "signal:pause", "x" * 9_000])
    pairs = st.lists(st.tuples(st.sampled_from(names), values), max_size=5)
    return pairs.map(lambda items: "?" + urlencode(items) if items else "")


@st.composite
def requests(draw: st.DrawFn, route: Route) -> tuple[str, str, bytes]:
    path = route.path
    for name in ("rollout_id", "attempt_id", "worker_id", "resources_id"):
        if "{" + name + "}" in path:
            value = draw(
                st.one_of(
                    st.text(min_size=1, max_size=16),
                    st.sampled_from(["latest", "search", "..", "a\x00b", "os:abort"]),
                )
            )
            path = path.replace("{" + name + "}", quote(value, safe="").replace(".", "%2E"))
    if route.method == "GET":
        return "GET", path + draw(_queries(route)), b""
    return "POST", path, draw(_bodies(route))


@pytest.fixture(scope="module", params=["memory", "sqlite"])
def fuzz_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BackgroundServer]:
    """One server per backend for the whole module; long polls capped short so random waits stay fast."""
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("fuzz") / "store.db"
        factory: Any = lambda: SqliteLightningStore(path)  # noqa: E731
    else:
        factory = InMemoryLightningStore
    with BackgroundServer(factory, max_wait_seconds=0.05, max_body_bytes=256 * 1024) as served:
        yield served


def _send(url: str, method: str, target: str, body: bytes, content_type: str) -> tuple[int, bytes, str]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request(method, target, body=body or None, headers={"Content-Type": content_type})
        response = conn.getresponse()
        return response.status, response.read(), response.getheader("Content-Type", "")
    finally:
        conn.close()


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.method} {r.path}")
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_route_never_fails_with_a_server_error(
    fuzz_server: BackgroundServer, route: Route, data: Any
) -> None:
    method, target, body = data.draw(requests(route))
    content_type = data.draw(st.sampled_from(["application/json", "application/x-protobuf", "text/plain"]))
    status, payload, received_type = _send(fuzz_server.endpoint, method, target, body, content_type)
    assert status < 500 or (status == 501 and route.kind == "none"), (status, payload[:300])
    if status >= 400 and received_type.startswith("application/json"):
        assert "error" in json.loads(payload)


def test_server_is_healthy_after_the_fuzzing(fuzz_server: BackgroundServer) -> None:
    status, payload, _ = _send(fuzz_server.endpoint, "GET", "/v1/agl/health", b"", "application/json")
    assert (status, json.loads(payload)) == (200, {"status": "ok"})
