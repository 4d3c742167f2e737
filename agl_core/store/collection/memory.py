"""Compatibility module for Agent Lightning 0.3's ``agentlightning.store.collection.memory``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__ = []

_NAMES: dict[str, Any] = {}

_REASON = (
    "agl has no collections layer; a backend implements LightningStore directly with the "
    "agl_core.store.logic toolkit (docs/stores.md)"
)

_DROPPED: dict[str, str] = dict.fromkeys(
    ["DequeBasedQueue", "DictBasedKeyValue", "InMemoryLightningCollections", "ListBasedCollection"], _REASON
)

__getattr__ = module_getattr("agl_core.store.collection.memory", _NAMES, _DROPPED)
