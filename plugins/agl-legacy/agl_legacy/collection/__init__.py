"""Collections: the storage layer of `agl_legacy.collection_based.CollectionBasedLightningStore`.

Agent Lightning 0.3's pluggable store storage, with the same names: the interfaces (`Collection`,
`Queue`, `KeyValue`, `LightningCollections`) and their in-memory implementation. Queries take agl's
`FilterOptions`, `SortOptions` and return `PaginatedResult`.
"""

from agl_core.types import FilterOptions, PaginatedResult, SortOptions
from agl_legacy.collection.base import (
    AtomicLabels,
    AtomicMode,
    Collection,
    KeyValue,
    LightningCollections,
    Queue,
)
from agl_legacy.collection.memory import (
    DequeBasedQueue,
    DictBasedKeyValue,
    InMemoryLightningCollections,
    ListBasedCollection,
)

__all__ = [
    "AtomicLabels",
    "AtomicMode",
    "Collection",
    "DequeBasedQueue",
    "DictBasedKeyValue",
    "FilterOptions",
    "InMemoryLightningCollections",
    "KeyValue",
    "LightningCollections",
    "ListBasedCollection",
    "PaginatedResult",
    "Queue",
    "SortOptions",
]
