"""Compatibility module for Agent Lightning 0.3's ``agentlightning.store.collection``.

Listed in docs/migrating-from-agent-lightning.md.

agl has no collections layer: the query types resolve to agl's, the collection classes raise
NotProvidedError.
"""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__ = ["FilterOptions", "PaginatedResult", "SortOptions"]

_NAMES: dict[str, Any] = {
    "FilterOptions": "agl_core.types:FilterOptions",
    "SortOptions": "agl_core.types:SortOptions",
    "PaginatedResult": "agl_core.types:PaginatedResult",
}

_REASON = (
    "agl has no collections layer; a backend implements LightningStore directly with the "
    "agl_core.store.logic toolkit (docs/stores.md)"
)

_DROPPED: dict[str, str] = dict.fromkeys(
    [
        "AtomicLabels",
        "AtomicMode",
        "Collection",
        "Queue",
        "KeyValue",
        "LightningCollections",
        "ListBasedCollection",
        "DequeBasedQueue",
        "DictBasedKeyValue",
        "InMemoryLightningCollections",
    ],
    _REASON,
)

__getattr__ = module_getattr("agl_core.store.collection", _NAMES, _DROPPED)
