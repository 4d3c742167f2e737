"""agl-postgres: a `LightningStore` on PostgreSQL, opened with ``postgresql://`` or ``postgres://`` URIs.

``open_store("postgresql://user@db:5432/agl?schema=exp7")`` or ``PostgresLightningStore(uri, ...)``.
Importing this package does not import the driver; the store module does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.4.0"

__all__ = ["PostgresLightningStore", "SchemaVersionError", "StoreUnavailableError", "__version__"]

if TYPE_CHECKING:
    from agl_postgres.errors import SchemaVersionError, StoreUnavailableError
    from agl_postgres.store import PostgresLightningStore


def __getattr__(name: str) -> Any:
    if name == "PostgresLightningStore":
        from agl_postgres.store import PostgresLightningStore

        return PostgresLightningStore
    if name in ("SchemaVersionError", "StoreUnavailableError"):
        from agl_postgres import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'agl_postgres' has no attribute {name!r}")
