"""0.3's ``CachedStaticFiles``: hashed build assets are cached for good, the rest is revalidated.

0.3 mounted it on FastAPI for the dashboard's ``/assets``; in agl it is an aiohttp handler, and agl's own
dashboard is served with it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

import agl_core as agl
from agl_core.dashboard import ASSETS_DIR
from agl_core.store.client_server import CachedStaticFiles
from agl_core.store.http import LightningStoreServer

IMMUTABLE = "public, max-age=31536000, immutable"


@pytest.fixture
async def dist(tmp_path: Path) -> AsyncIterator[TestClient[Any, Any]]:
    """A web app serving a bundler's output folder the way 0.3 served its dashboard build."""
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "index-BXz1Y2aQ.js").write_text("export const answer = 42;\n")
    (tmp_path / "assets" / "vendor.3f9a1b2c7d.css").write_text("body { margin: 0 }\n")
    (tmp_path / "assets" / "app.js").write_text("import './index-BXz1Y2aQ.js';\n")
    (tmp_path / "assets" / "release-notes.txt").write_text("stable name\n")
    (tmp_path / "secret.txt").write_text("outside the assets folder\n")
    app = web.Application()
    app.router.add_get(
        "/assets/{name:.+}", CachedStaticFiles(directory=tmp_path / "assets").handle, allow_head=True
    )
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


async def test_hashed_assets_are_immutable_and_others_revalidated(dist: TestClient[Any, Any]) -> None:
    response = await dist.get("/assets/index-BXz1Y2aQ.js")
    assert response.status == 200 and await response.text() == "export const answer = 42;\n"
    assert response.headers["Cache-Control"] == IMMUTABLE
    assert response.headers["Content-Type"].startswith("text/javascript")
    response = await dist.get("/assets/vendor.3f9a1b2c7d.css")
    assert response.headers["Cache-Control"] == IMMUTABLE and response.content_type == "text/css"
    for stable in ("app.js", "release-notes.txt"):
        response = await dist.get(f"/assets/{stable}")
        assert response.status == 200 and response.headers["Cache-Control"] == "no-cache", stable


async def test_revalidation_of_an_unchanged_file_is_a_304(dist: TestClient[Any, Any]) -> None:
    first = await dist.get("/assets/app.js")
    etag = first.headers["ETag"]
    again = await dist.get("/assets/app.js", headers={"If-None-Match": etag})
    assert again.status == 304 and await again.read() == b""
    head = await dist.head("/assets/index-BXz1Y2aQ.js")
    assert head.status == 200 and head.headers["Cache-Control"] == IMMUTABLE


async def test_names_outside_the_folder_or_missing_are_404(dist: TestClient[Any, Any]) -> None:
    for path in ("/assets/../secret.txt", "/assets/%2e%2e/secret.txt", "/assets/missing-1234abcd.js"):
        response = await dist.get(path)
        assert response.status == 404, path
        assert "secret" not in await response.text()


def test_which_names_count_as_content_hashed() -> None:
    hashed = ["index-BXz1Y2aQ.js", "assets/main.8f3c2a1b.css", "chunk-a1b2c3d4e5f6a7b8c9d0.js"]
    stable = ["app.js", "index.html", "my-component.js", "views/rollouts.js", "settings-panel.css"]
    assert all(CachedStaticFiles.cache_control(name) == IMMUTABLE for name in hashed)
    assert all(CachedStaticFiles.cache_control(name) == "no-cache" for name in stable)


async def test_agl_dashboard_is_served_with_it(tmp_path: Path) -> None:
    """`agl store serve`'s dashboard: no asset name is hashed, so each is revalidated (cheaply)."""
    assert not [p for p in ASSETS_DIR.rglob("*.*") if CachedStaticFiles.cache_control(p.name) == IMMUTABLE]
    server = LightningStoreServer(agl.InMemoryLightningStore(), port=0)
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(server.endpoint + "/dashboard/app.js") as response:
                assert response.status == 200 and response.headers["Cache-Control"] == "no-cache"
                assert "script-src 'self'" in response.headers["Content-Security-Policy"]
                etag = response.headers["ETag"]
            async with session.get(
                server.endpoint + "/dashboard/app.js", headers={"If-None-Match": etag}
            ) as response:
                assert response.status == 304
    finally:
        await server.stop()
