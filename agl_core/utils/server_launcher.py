"""Compatibility module for Agent Lightning 0.3's ``agentlightning.utils.server_launcher``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__ = []

_NAMES: dict[str, Any] = {}

_REASON = (
    "agl serves HTTP with aiohttp in the calling event loop: use "
    "LightningStoreServer.start()/run_forever() or `agl store serve`"
)

_DROPPED: dict[str, str] = dict.fromkeys(
    ["PythonServerLauncher", "PythonServerLauncherArgs", "LaunchMode"], _REASON
)

__getattr__ = module_getattr("agl_core.utils.server_launcher", _NAMES, _DROPPED)
