"""Compatibility module for Agent Lightning 0.3's ``agentlightning.store.collection.mongo``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__: list[str] = []

_NAMES: dict[str, Any] = {}

_REASON = (
    "agl's collections layer (agl_core.store.collection) is in memory only; MongoDB is the agl-mongo "
    "plugin's MongoLightningStore (pip install agl-mongo)"
)

_DROPPED: dict[str, str] = dict.fromkeys(
    [
        "MongoBasedCollection",
        "MongoBasedKeyValue",
        "MongoBasedQueue",
        "MongoClientPool",
        "MongoLightningCollections",
    ],
    _REASON,
)


def resolve_mongo_error_type(exc: BaseException | None) -> str | None:
    """The metrics label of a pymongo error (``-Transient`` for transient transaction errors), else None.

    None also when pymongo is not installed.
    """
    try:
        from pymongo.errors import OperationFailure, PyMongoError
    except ImportError:
        return None
    transient = isinstance(exc, PyMongoError) and exc.has_error_label("TransientTransactionError")
    suffix = "-Transient" if transient else ""
    if isinstance(exc, OperationFailure):
        return f"OperationFailure-{exc.code}{suffix}"
    if isinstance(exc, PyMongoError):
        return f"{type(exc).__name__}{suffix}"
    return None


__getattr__ = module_getattr("agl_core.store.collection.mongo", _NAMES, _DROPPED)
