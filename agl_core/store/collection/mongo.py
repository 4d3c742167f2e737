"""Compatibility module for Agent Lightning 0.3's ``agentlightning.store.collection.mongo``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__: list[str] = []

_NAMES: dict[str, Any] = {}

_REASON = (
    "agl's collections layer (agl_core.store.collection) is in memory only; for MongoDB use the agl-mongo "
    "plugin's MongoLightningStore (a LightningStore, not collections)"
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


__getattr__ = module_getattr("agl_core.store.collection.mongo", _NAMES, _DROPPED)
