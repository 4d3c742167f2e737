"""The dashboard's files and the doctor route on a live `LightningStoreServer` (no browser needed)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from agl_core.dashboard import ASSETS_DIR
from agl_core.store import open_store
from agl_core.store.http.openapi import openapi_document
from agl_core.store.http.server import LightningStoreServer
from tests.dashboard.store_data import small_store

TOKEN = "t0ken"


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[str, list[str]]]:
    ids = await small_store(tmp_path / "s.db")
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    srv = LightningStoreServer(store, port=0, token=TOKEN)
    await srv.start()
    try:
        yield srv.endpoint, ids
    finally:
        await srv.stop()
        await store.close()


async def fetch(url: str, token: str | None = None) -> tuple[int, dict[str, str], bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as response:
        return response.status, dict(response.headers), await response.read()


async def test_page_and_assets_are_served_without_token_and_scripts_only_from_self(server) -> None:  # type: ignore[no-untyped-def]
    url, _ = server
    status, headers, body = await fetch(url + "/")
    assert status == 200
    assert headers["Content-Type"].startswith("text/html")
    assert b'src="/dashboard/app.js"' in body
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert "connect-src 'self'" in headers["Content-Security-Policy"]
    for name in ("app.js", "views/rollout.js", "style.css", "docs.js"):
        status, headers, body = await fetch(f"{url}/dashboard/{name}")
        assert status == 200, name
        assert body == (ASSETS_DIR / name).read_bytes()
    status, headers, _ = await fetch(url + "/docs")
    assert status == 200 and headers["Content-Type"].startswith("text/html")


async def test_asset_paths_cannot_leave_the_assets_folder(server) -> None:  # type: ignore[no-untyped-def]
    url, _ = server
    for path in ("/dashboard/../assets.py", "/dashboard/%2e%2e/assets.py", "/dashboard/missing.js"):
        status, headers, _ = await fetch(url + path)
        assert status == 404, path
        assert headers["Content-Type"].startswith("application/json")


async def test_api_still_needs_the_token(server) -> None:  # type: ignore[no-untyped-def]
    url, _ = server
    assert (await fetch(url + "/v1/agl/rollouts"))[0] == 401
    assert (await fetch(url + "/v1/agl/rollouts", TOKEN))[0] == 200


async def test_doctor_route_reports_the_rollout(server) -> None:  # type: ignore[no-untyped-def]
    import json

    url, ids = server
    status, _, body = await fetch(f"{url}/v1/agl/rollouts/{ids[1]}/doctor", TOKEN)
    assert status == 200
    report = json.loads(body)
    assert report["rollout_id"] == ids[1]
    assert report["report"]["span_count"] == 2
    assert report["report"]["llm_span_count"] == 1
    status, _, body = await fetch(f"{url}/v1/agl/rollouts/ro-missing/doctor", TOKEN)
    assert status == 404
    assert "ro-missing" in json.loads(body)["error"]["message"]
    status, _, body = await fetch(f"{url}/v1/agl/rollouts/{ids[1]}/doctor?adapter=nope", TOKEN)
    assert status == 400
    assert (await fetch(f"{url}/v1/agl/rollouts/{ids[1]}/doctor"))[0] == 401


def test_doctor_route_is_in_the_openapi_document() -> None:
    operation = openapi_document()["paths"]["/v1/agl/rollouts/{rollout_id}/doctor"]["get"]
    assert operation["operationId"] == "rollout_doctor"
    assert {p["name"] for p in operation["parameters"]} == {"rollout_id", "attempt", "adapter"}
    assert "DoctorReport" in str(operation["responses"]["200"])


def test_wheel_ships_the_dashboard_assets(tmp_path: Path) -> None:
    import subprocess
    import sys
    import zipfile

    root = Path(__file__).resolve().parents[2]
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path)],
        cwd=root,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        f"agl_core/dashboard/static/{p.relative_to(ASSETS_DIR).as_posix()}" for p in ASSETS_DIR.rglob("*.*")
    }
    assert expected <= names
