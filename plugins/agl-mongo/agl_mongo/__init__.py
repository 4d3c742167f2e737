"""agl-mongo: a `LightningStore` on a plain MongoDB server, opened with ``mongodb://`` URIs.

``open_store("mongodb://host:27017/agl")`` or ``MongoLightningStore(uri, partition_id="run-7")``.
Needs no replica set. Importing this package imports pymongo; the plugin hooks (`agl_mongo.hooks`)
do not.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from agl_core.utils.lazy import lazy_exports

try:
    __version__ = version("agl-mongo")  # one source: agl_core/__init__.py, through the build metadata
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = ["MongoLightningStore", "SchemaVersionError", "StoreUnavailableError", "__version__"]

if TYPE_CHECKING:
    from agl_mongo.errors import SchemaVersionError, StoreUnavailableError
    from agl_mongo.store import MongoLightningStore

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "MongoLightningStore": "agl_mongo.store",
        "SchemaVersionError": "agl_mongo.errors",
        "StoreUnavailableError": "agl_mongo.errors",
    },
)
