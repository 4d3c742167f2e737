"""The read-only web dashboard of a store server: static HTML/CSS/JS served next to the ``/v1/agl`` API.

The page is plain ES modules and CSS (no build step, no CDN, no web fonts) that talk to the public
``/v1/agl`` routes with ``fetch``, exactly like any other client. `add_dashboard_routes` mounts it on an
aiohttp router (`agl_core.store.http.server.LightningStoreServer` does this itself); the assets carry no
store data, so they need no token, while every API call the page makes does.
"""

from __future__ import annotations

from agl_core.dashboard.assets import (
    ASSETS_DIR,
    DASHBOARD_PREFIX,
    PAGE_PATHS,
    add_dashboard_routes,
    asset_bytes,
)
from agl_core.dashboard.static_files import CachedStaticFiles

__all__ = [
    "ASSETS_DIR",
    "DASHBOARD_PREFIX",
    "PAGE_PATHS",
    "CachedStaticFiles",
    "add_dashboard_routes",
    "asset_bytes",
]
