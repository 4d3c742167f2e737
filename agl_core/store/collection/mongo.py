"""Compatibility module for Agent Lightning 0.3's ``agentlightning.store.collection.mongo``.

Listed in docs/migrating-from-agent-lightning.md. The Mongo collections (`MongoLightningCollections`,
`MongoClientPool`, ...) are agl-mongo's (``pip install agl-mongo``), loaded on first access.
"""

from __future__ import annotations

from typing import Any

from agl_core._compat import PluginName, module_getattr

__all__: list[str] = []

_CLASSES = [
    "MongoBasedCollection",
    "MongoBasedKeyValue",
    "MongoBasedQueue",
    "MongoClientPool",
    "MongoLightningCollections",
]

# agl-mongo's collections, found through the module of its registered store (agl_mongo.store).
_NAMES: dict[str, Any] = {
    name: PluginName("store", "mongo", "agl-mongo", attribute=name) for name in _CLASSES
}


def _is_pymongo(exc: BaseException, class_name: str) -> bool:
    return any(
        cls.__name__ == class_name and cls.__module__.startswith("pymongo") for cls in type(exc).__mro__
    )


def resolve_mongo_error_type(exc: BaseException | None) -> str | None:
    """The metrics label of a pymongo error (``-Transient`` for transient transaction errors), else None.

    Reads the error's classes, so pymongo is never imported here.
    """
    if exc is None or not _is_pymongo(exc, "PyMongoError"):
        return None
    has_label = getattr(exc, "has_error_label", None)
    suffix = "-Transient" if callable(has_label) and has_label("TransientTransactionError") else ""
    if _is_pymongo(exc, "OperationFailure"):
        return f"OperationFailure-{getattr(exc, 'code', None)}{suffix}"
    return f"{type(exc).__name__}{suffix}"


__getattr__ = module_getattr("agl_core.store.collection.mongo", _NAMES)
