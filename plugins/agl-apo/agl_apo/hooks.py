"""Entry point of the agl-apo plugin: registers the ``apo`` algorithm (imports nothing but agl_core)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agl_core import hookimpl

if TYPE_CHECKING:
    from agl_core.registry import Registry


AGL_PLUGIN_API_VERSION = 1
"""The agl plugin contract version these hooks are built for (see `agl plugins check`)."""


@hookimpl
def agl_register_algorithms(registry: Registry[Any]) -> None:
    """Register ``apo`` (:class:`agl_apo.algorithm.APO`), imported only when it is first used."""
    registry.add(
        "apo",
        "agl_apo.algorithm:APO",
        summary="Automatic prompt optimization: textual gradients + beam search on any OpenAI-compatible API",
        requires=["openai>=1.26", "rich>=13"],
    )
