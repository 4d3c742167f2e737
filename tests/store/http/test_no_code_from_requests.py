"""No request names code: the store server resolves only registered component names (issue 34, item 1)."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from agl_core.adapter.doctor import resolve_adapter
from agl_core.store.http import BackgroundServer

from .test_rest_api import request

# Callables an import-path resolver would call: a pid (int), a crash, an exit, a hang, and a probe.
TARGETS = ["os:getpid", "os.getpid", "os:abort", "sys:exit", "signal:pause", "agl_probe:hit", "agl_probe.hit"]


@pytest.fixture
def probe() -> Iterator[list[str]]:
    """A module ``agl_probe`` whose ``hit()`` records each call: a resolver that imports would call it."""
    calls: list[str] = []
    module = types.ModuleType("agl_probe")
    module.hit = lambda *args, **kwargs: calls.append("hit")  # type: ignore[attr-defined]
    sys.modules["agl_probe"] = module
    yield calls
    del sys.modules["agl_probe"]


@pytest.mark.parametrize("target", TARGETS)
def test_doctor_route_refuses_an_import_target_with_400_listing_the_names(
    server: BackgroundServer, probe: list[str], target: str
) -> None:
    rollout = request(server.endpoint, "POST", "/v1/agl/rollouts", {"input": "x"})[2]
    path = f"/v1/agl/rollouts/{rollout['rollout_id']}/doctor?adapter={target}"
    status, _, body = request(server.endpoint, "GET", path)
    assert status == 400, body
    message = body["error"]["message"]
    assert f"Unknown adapter {target!r}. Registered adapters: " in message
    assert "proxy-triplet" in message and "triplet" in message
    assert probe == []
    # The server is still there and still has the rollout.
    assert request(server.endpoint, "GET", f"/v1/agl/rollouts/{rollout['rollout_id']}")[0] == 200


def test_doctor_route_answers_with_a_registered_name(server: BackgroundServer) -> None:
    rollout = request(server.endpoint, "POST", "/v1/agl/rollouts", {"input": "x"})[2]
    path = f"/v1/agl/rollouts/{rollout['rollout_id']}/doctor?adapter=proxy-triplet"
    status, _, body = request(server.endpoint, "GET", path)
    assert status == 200, body
    assert body["rollout_id"] == rollout["rollout_id"]


@pytest.mark.parametrize("target", ["agl_probe:hit", "agl_probe.hit"])
def test_resolve_adapter_imports_nothing(probe: list[str], target: str) -> None:
    with pytest.raises(ValueError, match=f"Unknown adapter '{target}'"):
        resolve_adapter(target)
    assert probe == []
