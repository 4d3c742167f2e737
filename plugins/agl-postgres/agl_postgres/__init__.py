"""agl-postgres: a `LightningStore` on PostgreSQL, opened with ``postgresql://`` or ``postgres://`` URIs.

``open_store("postgresql://user@db:5432/agl?schema=exp7")`` or ``PostgresLightningStore(uri, ...)``.
Importing this package does not import the driver; the store module does.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from agl_core.utils.lazy import lazy_exports

try:
    __version__ = version("agl-postgres")  # one source: agl_core/__init__.py, through the build metadata
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = ["PostgresLightningStore", "SchemaVersionError", "StoreUnavailableError", "__version__"]

if TYPE_CHECKING:
    from agl_postgres.errors import SchemaVersionError, StoreUnavailableError
    from agl_postgres.store import PostgresLightningStore

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "PostgresLightningStore": "agl_postgres.store",
        "SchemaVersionError": "agl_postgres.errors",
        "StoreUnavailableError": "agl_postgres.errors",
    },
)
