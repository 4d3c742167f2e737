"""0.3's ``PythonServerLauncher``: serve an app in this loop or a thread, health-checked, then stop."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from agl_core.utils.server_launcher import PythonServerLauncher, PythonServerLauncherArgs


def _app() -> web.Application:
    async def health(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    app = web.Application()
    app.router.add_get("/health", health)
    return app


async def _status(url: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status


@pytest.mark.parametrize("mode", ["asyncio", "thread"])
async def test_launcher_serves_and_stops(mode: str) -> None:
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def serve_context() -> AsyncIterator[None]:
        events.append("enter")
        yield
        events.append("exit")

    args = PythonServerLauncherArgs(host="127.0.0.1", launch_mode=mode, healthcheck_url="/health")  # type: ignore[arg-type]
    launcher = PythonServerLauncher(_app(), args, serve_context=serve_context())
    await launcher.start()
    try:
        assert launcher.is_running() and launcher.health_url is not None
        assert launcher.endpoint.startswith("http://127.0.0.1:") and not launcher.endpoint.endswith(":None")
        assert await _status(launcher.health_url) == 200
    finally:
        await launcher.stop()
    assert not launcher.is_running() and events == ["enter", "exit"]
    with pytest.raises(aiohttp.ClientError):
        await _status(launcher.access_endpoint + "/health")


async def test_unhealthy_server_is_stopped_and_reported() -> None:
    args = PythonServerLauncherArgs(host="127.0.0.1", healthcheck_url="/missing", startup_timeout=0.5)
    launcher = PythonServerLauncher(_app(), args)
    with pytest.raises(RuntimeError, match="did not become healthy"):
        await launcher.start()
    assert not launcher.is_running()


def test_unsupported_modes_name_what_works() -> None:
    with pytest.raises(ValueError, match="'asyncio' or 'thread'"):
        PythonServerLauncher(_app(), PythonServerLauncherArgs(launch_mode="mp"))
    with pytest.raises(TypeError, match="aiohttp"):
        PythonServerLauncher(object(), PythonServerLauncherArgs())  # type: ignore[arg-type]
