"""Serve the dashboard's files (GET only) from the package's ``static`` folder, with `CachedStaticFiles`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from agl_core.dashboard.static_files import CachedStaticFiles

__all__ = [
    "ASSETS_DIR",
    "CONTENT_SECURITY_POLICY",
    "DASHBOARD_PREFIX",
    "PAGE_PATHS",
    "add_dashboard_routes",
    "asset_bytes",
]

ASSETS_DIR = Path(__file__).with_name("static")
"""Folder of the dashboard's HTML, CSS and JavaScript files (shipped in the wheel)."""

DASHBOARD_PREFIX = "/dashboard"
"""URL prefix of the dashboard's assets; ``/`` serves ``index.html`` and ``/docs`` the API docs page."""

PAGE_PATHS = ("/", "/docs", DASHBOARD_PREFIX + "/{name}")
"""The paths `add_dashboard_routes` adds (web pages, not part of the API document)."""

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""Only the page's own scripts run: no inline script, no script from span content, no other origin."""

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_FILES = CachedStaticFiles(
    ASSETS_DIR,
    headers={
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    },
)


def asset_bytes(name: str) -> bytes:
    """The content of one asset file, e.g. ``"index.html"``.

    Raises:
        FileNotFoundError: no such asset (or a name that leaves the assets folder).
    """
    return _FILES.path_of(name).read_bytes()


def _response(name: str) -> web.StreamResponse:
    try:
        return _FILES.file_response(name)
    except FileNotFoundError:
        error = {
            "type": "RouteNotFound",
            "message": f"No dashboard file {name!r}; open / instead.",
            "details": {},
        }
        return web.json_response({"error": error}, status=404)


async def _index(request: web.Request) -> web.StreamResponse:
    return _response("index.html")


async def _docs(request: web.Request) -> web.StreamResponse:
    return _response("docs.html")


async def _asset(request: web.Request) -> web.StreamResponse:
    return _response(request.match_info["name"])


def add_dashboard_routes(
    router: web.UrlDispatcher,
    wrap: Callable[[_Handler], _Handler] | None = None,
) -> None:
    """Add ``GET /`` (the dashboard), ``GET /docs`` (the API docs) and ``GET /dashboard/{name}`` (assets).

    `wrap`, when given, wraps each handler (the store server puts its request guard around them).
    """
    handlers = (_index, _docs, _asset) if wrap is None else (wrap(_index), wrap(_docs), wrap(_asset))
    router.add_get("/", handlers[0], allow_head=True)
    router.add_get("/docs", handlers[1], allow_head=True)
    router.add_get(DASHBOARD_PREFIX + "/{name:[A-Za-z0-9_./-]+}", handlers[2], allow_head=True)
