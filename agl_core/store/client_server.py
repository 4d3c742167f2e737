"""Compatibility module for Agent Lightning 0.3's ``agentlightning.store.client_server``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__ = ["LightningStoreClient", "LightningStoreServer"]  # noqa: F822 (resolved by __getattr__)

_NAMES: dict[str, Any] = {
    "LightningStoreClient": "agl_core.store.http:LightningStoreClient",
    "LightningStoreServer": "agl_core.store.http:LightningStoreServer",
}

_DROPPED: dict[str, str] = {}

__getattr__ = module_getattr("agl_core.store.client_server", _NAMES, _DROPPED)
