"""The store over HTTP: `LightningStoreServer` (aiohttp), `LightningStoreClient`, OTLP/HTTP intake.

Names are imported lazily, so ``import agl_core.store`` never loads aiohttp or protobuf.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agl_core.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from agl_core.store.http.background import BackgroundServer
    from agl_core.store.http.client import LightningStoreClient
    from agl_core.store.http.errors import (
        PayloadTooLargeError,
        RequestValidationError,
        StoreAuthenticationError,
        StoreProtocolError,
        StoreServerError,
        StoreUnavailableError,
    )
    from agl_core.store.http.server import LightningStoreServer

__all__ = [
    "BackgroundServer",
    "LightningStoreClient",
    "LightningStoreServer",
    "PayloadTooLargeError",
    "RequestValidationError",
    "StoreAuthenticationError",
    "StoreProtocolError",
    "StoreServerError",
    "StoreUnavailableError",
]

_LOCATIONS = {
    "BackgroundServer": "agl_core.store.http.background",
    "LightningStoreClient": "agl_core.store.http.client",
    "LightningStoreServer": "agl_core.store.http.server",
    "PayloadTooLargeError": "agl_core.store.http.errors",
    "RequestValidationError": "agl_core.store.http.errors",
    "StoreAuthenticationError": "agl_core.store.http.errors",
    "StoreProtocolError": "agl_core.store.http.errors",
    "StoreServerError": "agl_core.store.http.errors",
    "StoreUnavailableError": "agl_core.store.http.errors",
}

__getattr__, __dir__ = lazy_exports(__name__, _LOCATIONS)
