"""Entry point of the agl-tinker plugin: registers the ``tinker`` algorithm (imports nothing but agl_core)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agl_core import hookimpl

if TYPE_CHECKING:
    from agl_core.registry import Registry


AGL_PLUGIN_API_VERSION = 1
"""The agl plugin contract version these hooks are built for (see `agl plugins check`)."""


@hookimpl
def agl_register_algorithms(registry: Registry[Any]) -> None:
    """Register ``tinker`` (:class:`agl_tinker.algorithm.Tinker`), imported only when it is first used."""
    registry.add(
        "tinker",
        "agl_tinker.algorithm:Tinker",
        summary="RL on the Tinker training API (hosted), or a local CPU stand-in with the same interface",
        requires=["tinker>=0.38", "transformers>=5", "peft>=0.17", "matplotlib>=3.7", "rich>=13"],
    )
