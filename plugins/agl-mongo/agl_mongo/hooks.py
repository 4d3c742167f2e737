"""agl plugin hooks of agl-mongo (imports only agl_core, never pymongo)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agl_core import hookimpl

if TYPE_CHECKING:
    from agl_core.registry import Registry


AGL_PLUGIN_API_VERSION = 1
"""The agl plugin contract version these hooks are built for (see `agl plugins check`)."""


@hookimpl
def agl_register_stores(registry: Registry[Any]) -> None:
    """The ``mongo`` store, opened by ``mongodb://`` and ``mongodb+srv://`` URIs."""
    registry.add(
        "mongo",
        "agl_mongo.store:MongoLightningStore",
        summary="Rollouts and spans in MongoDB (standalone server is enough; many runners, many machines)",
        requires=["pymongo>=4.10"],
        schemes=["mongodb", "mongodb+srv"],
    )
