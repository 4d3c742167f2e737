"""LightningStore: the contract, its typed errors, `open_store`, and the bundled stores (imported lazily)."""

from agl_core.store.base import (
    UNSET,
    LightningStore,
    LightningStoreCapabilities,
    LightningStoreStatistics,
    Unset,
)
from agl_core.store.errors import (
    AttemptNotFoundError,
    InvalidArgumentTypeError,
    InvalidFilterError,
    InvalidRequestError,
    InvalidSpanError,
    InvalidStatusError,
    NotFoundError,
    ResourcesNotFoundError,
    RolloutNotFoundError,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreOpenError,
)
from agl_core.store.uri import open_store, parse_store_uri
from agl_core.utils.lazy import lazy_exports

# Implementations, imported on first access (Agent Lightning 0.3 exported them here; the last three are
# compatibility names, see docs/migrating-from-agent-lightning.md).
_LAZY = {
    "InMemoryLightningStore": "agl_core.store.memory",
    "SqliteLightningStore": "agl_core.store.sqlite",
    "LightningStoreClient": "agl_core.store.http",
    "LightningStoreServer": "agl_core.store.http",
    "LightningStoreThreaded": "agl_core.store.threading",
    "CollectionBasedLightningStore": "agl_core.store.collection_based",
    "MongoLightningStore": "agl_core.store.mongo",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "UNSET",
    "AttemptNotFoundError",
    "InMemoryLightningStore",
    "InvalidArgumentTypeError",
    "InvalidFilterError",
    "InvalidRequestError",
    "InvalidSpanError",
    "InvalidStatusError",
    "LightningStore",
    "LightningStoreCapabilities",
    "LightningStoreClient",
    "LightningStoreServer",
    "LightningStoreStatistics",
    "LightningStoreThreaded",
    "NotFoundError",
    "ResourcesNotFoundError",
    "RolloutNotFoundError",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreOpenError",
    "Unset",
    "open_store",
    "parse_store_uri",
]
