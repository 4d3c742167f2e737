"""NUL in text over REST is a 400 naming the field, on every backend (issue 34, item 2)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agl_core.store.http import BackgroundServer
from agl_core.store.memory import InMemoryLightningStore
from agl_core.store.sqlite import SqliteLightningStore
from agl_testing.store_conformance import make_span

from .test_rest_api import request


@pytest.fixture(params=["memory", "sqlite"])
def any_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackgroundServer]:
    factory: Any = (
        (lambda: SqliteLightningStore(tmp_path / "s.db"))
        if request.param == "sqlite"
        else InMemoryLightningStore
    )
    with BackgroundServer(factory) as running:
        yield running


@pytest.mark.parametrize("field", ["name", "trace_id", "parent_id"])
def test_a_span_with_nul_text_is_a_400_naming_the_field(any_server: BackgroundServer, field: str) -> None:
    rollout = request(any_server.endpoint, "POST", "/v1/agl/rollouts", {"input": "x"})[2]
    span = make_span(rollout["rollout_id"], rollout["attempt"]["attempt_id"], 1).model_dump(mode="json")
    span[field] = "a\x00b"
    for path, body in (("/v1/agl/spans", span), ("/v1/agl/spans/batch", {"spans": [span]})):
        status, _, answer = request(any_server.endpoint, "POST", path, body)
        assert status == 400, (path, answer)
        assert f"Span {field} contains a NUL" in answer["error"]["message"]
    assert request(any_server.endpoint, "GET", "/v1/agl/statistics")[2]["total_spans"] == 0


@pytest.mark.parametrize(
    "query", ["/v1/agl/rollouts?rollout_id_contains=a%00b", "/v1/agl/resources?resources_id_contains=%00"]
)
def test_a_filter_with_nul_is_a_400(any_server: BackgroundServer, query: str) -> None:
    status, _, answer = request(any_server.endpoint, "GET", query)
    assert status == 400, answer
    assert "contains a NUL character" in answer["error"]["message"]


def test_an_id_with_nul_in_the_path_is_a_400(any_server: BackgroundServer) -> None:
    status, _, answer = request(any_server.endpoint, "GET", "/v1/agl/rollouts/ro-a%00b")
    assert status == 400 and "rollout_id contains a NUL character" in answer["error"]["message"], answer
