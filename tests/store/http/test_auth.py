"""Bearer-token auth: every route but the health checks needs the token; the right one works."""

from __future__ import annotations

import asyncio

import pytest

from agl_core.store.http import BackgroundServer, LightningStoreClient, StoreAuthenticationError
from agl_core.store.http.routes import ROUTES, Route

from .conftest import TOKEN
from .test_rest_api import concrete, request

PROTECTED = [route for route in ROUTES if route.auth]


def _call(server: BackgroundServer, route: Route, headers: dict[str, str]) -> int:
    status, response_headers, body = request(
        server.endpoint, route.method, concrete(route.path), raw=b"{}", headers=headers
    )
    if status == 401:
        assert response_headers["www-authenticate"] == "Bearer"
        assert body["error"]["type"] == "StoreAuthenticationError"
    return status


@pytest.mark.parametrize("route", PROTECTED, ids=lambda r: f"{r.method} {r.path}")
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": TOKEN},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Basic {TOKEN}"},
    ],
    ids=["missing", "wrong", "no-scheme", "longer", "basic"],
)
def test_every_route_rejects_a_missing_or_wrong_token(
    token_server: BackgroundServer, route: Route, headers: dict[str, str]
) -> None:
    assert _call(token_server, route, headers) == 401


@pytest.mark.parametrize("route", PROTECTED, ids=lambda r: f"{r.method} {r.path}")
def test_every_route_accepts_the_right_token(token_server: BackgroundServer, route: Route) -> None:
    assert _call(token_server, route, {"Authorization": f"Bearer {TOKEN}"}) != 401


@pytest.mark.parametrize("path", ["/health", "/v1/agl/health"])
def test_health_needs_no_token(token_server: BackgroundServer, path: str) -> None:
    assert request(token_server.endpoint, "GET", path)[0] == 200


def test_client_with_token_works_and_without_gets_a_clear_error(
    token_server: BackgroundServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGL_STORE_TOKEN", raising=False)

    async def main() -> None:
        good = LightningStoreClient(token_server.endpoint, token=TOKEN)
        bad = LightningStoreClient(token_server.endpoint)
        try:
            rollout = await good.enqueue_rollout({"x": 1})
            assert (await good.get_rollout_by_id(rollout.rollout_id)) is not None
            with pytest.raises(StoreAuthenticationError, match="AGL_STORE_TOKEN"):
                await bad.query_rollouts()
            monkeypatch.setenv("AGL_STORE_TOKEN", TOKEN)
            from_env = LightningStoreClient(token_server.endpoint)
            assert len(await from_env.query_rollouts()) == 1
            await from_env.close()
        finally:
            await good.close()
            await bad.close()

    asyncio.run(main())
