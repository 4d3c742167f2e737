"""LightningStore: the contract, its typed errors, and (once wired) the bundled implementations."""

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

# --- Implementations: wire here once they exist (phase 2). -------------------------------------
# from agl_core.store.memory import InMemoryLightningStore
# from agl_core.store.sqlite import SqliteLightningStore
# `open_store` (agl_core/store/uri.py) is minimal; the lead connects it to the plugin registry
# (`agl_register_stores`), which should register the "memory" and "sqlite" schemes.
# -----------------------------------------------------------------------------------------------

__all__ = [
    "UNSET",
    "AttemptNotFoundError",
    "InvalidFilterError",
    "InvalidRequestError",
    "InvalidSpanError",
    "InvalidStatusError",
    "LightningStore",
    "LightningStoreCapabilities",
    "LightningStoreStatistics",
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
