"""agl-mongo: a `LightningStore` on a plain MongoDB server, opened with ``mongodb://`` URIs.

``open_store("mongodb://host:27017/agl")`` or ``MongoLightningStore(uri, partition_id="run-7")``.
Needs no replica set. Importing this package imports pymongo; the plugin hooks (`agl_mongo.hooks`)
do not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.4.0"

__all__ = ["MongoLightningStore", "SchemaVersionError", "StoreUnavailableError", "__version__"]

if TYPE_CHECKING:
    from agl_mongo.errors import SchemaVersionError, StoreUnavailableError
    from agl_mongo.store import MongoLightningStore


def __getattr__(name: str) -> Any:
    if name == "MongoLightningStore":
        from agl_mongo.store import MongoLightningStore

        return MongoLightningStore
    if name in ("SchemaVersionError", "StoreUnavailableError"):
        from agl_mongo import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'agl_mongo' has no attribute {name!r}")
