"""agl-mongo: a `LightningStore` on a plain MongoDB server, opened with ``mongodb://`` URIs.

``open_store("mongodb://host:27017/agl")`` or ``MongoLightningStore(uri, partition_id="run-7")``.
Needs no replica set. Importing this package imports pymongo; the plugin hooks (`agl_mongo.hooks`)
do not.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("agl-mongo")  # one source: agl_core/__init__.py, through the build metadata
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

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
