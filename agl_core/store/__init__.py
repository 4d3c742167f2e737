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


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agl_core.store' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "UNSET",
    "AttemptNotFoundError",
    "InMemoryLightningStore",
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
