"""Compatibility module for Agent Lightning 0.3's ``agentlightning.store.mongo``.

Listed in docs/migrating-from-agent-lightning.md.

``MongoLightningStore`` lives in the agl-mongo plugin (``pip install agl-mongo``) and is loaded on first
access.
"""

from __future__ import annotations

from typing import Any

from agl_core._compat import PluginName, module_getattr

__all__ = ["MongoLightningStore"]  # noqa: F822 (resolved by __getattr__)

_NAMES: dict[str, Any] = {
    "MongoLightningStore": PluginName("store", "mongo", "agl-mongo"),
}

__getattr__ = module_getattr("agl_core.store.mongo", _NAMES)
