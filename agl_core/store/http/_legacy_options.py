"""Agent Lightning 0.3's `LightningStoreServer` arguments, mapped onto agl's server (compatibility only).

0.3 ran the server through a launcher (uvicorn in a thread, or gunicorn workers in child processes). agl
serves from the caller's event loop with aiohttp, so:

* ``port=None`` means 4747 (0.3's default, with the same warning); agl's own default is 0 (a free port);
* ``cors_allow_origins`` is the old name of ``cors_origins`` (a single string is one origin);
* ``launch_mode`` ``"thread"`` or ``"asyncio"`` both serve from the running loop; ``"mp"``, ``n_workers>1``,
  ``launcher_args`` and ``tracker`` have no agl equivalent and raise a ValueError naming what to use.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

__all__ = ["LEGACY_DEFAULT_PORT", "legacy_server_options"]

logger = logging.getLogger("agl_core.store.http.server")

LEGACY_DEFAULT_PORT = 4747
"""The port Agent Lightning 0.3 used when none was given."""


def legacy_server_options(
    port: int | None,
    cors_origins: Sequence[str] | None,
    cors_allow_origins: Sequence[str] | str | None,
    launch_mode: str | None,
    launcher_args: object,
    n_workers: int,
    tracker: object,
) -> tuple[int, Sequence[str] | None]:
    """Check 0.3's arguments; return the ``(port, cors_origins)`` agl's server uses."""
    if launcher_args is not None:
        raise ValueError(
            "LightningStoreServer(launcher_args=...) is not supported by agl (there is no server launcher): "
            "pass host= and port= instead."
        )
    if launch_mode not in (None, "thread", "asyncio"):
        raise ValueError(
            f"LightningStoreServer(launch_mode={launch_mode!r}) is not supported by agl: the server runs in "
            "the calling event loop. Use `agl store serve` for a separate server process."
        )
    if n_workers != 1:
        raise ValueError(
            f"LightningStoreServer(n_workers={n_workers}) is not supported by agl: one aiohttp server "
            "serves all clients. Use a database store (sqlite:///..., mongodb://...) to share data."
        )
    if tracker is not None:
        raise ValueError(
            "LightningStoreServer(tracker=...) is not supported by agl: metrics backends were dropped. Read "
            "`await store.statistics()` or the server's /v1/agl/statistics route instead."
        )
    if port is None:
        logger.warning("No port provided, using default port %d.", LEGACY_DEFAULT_PORT)
        port = LEGACY_DEFAULT_PORT
    if cors_allow_origins is not None:
        if cors_origins is not None:
            raise ValueError("Pass cors_origins or its old name cors_allow_origins, not both.")
        cors_origins = (
            [cors_allow_origins] if isinstance(cors_allow_origins, str) else list(cors_allow_origins)
        )
    return port, cors_origins
