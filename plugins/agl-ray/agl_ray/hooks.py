"""Registers the ``ray`` execution strategy; imports only agl_core, so listing plugins never imports Ray."""

from __future__ import annotations

from typing import Any

from agl_core import hookimpl

AGL_PLUGIN_API_VERSION = 1
"""The agl plugin contract version these hooks are built for (see `agl plugins check`)."""


@hookimpl
def agl_register_strategies(registry: Any) -> None:
    """The ``ray`` strategy: the algorithm in the driver, every runner a Ray actor."""
    registry.add(
        "ray",
        "agl_ray.strategy:RayExecutionStrategy",
        summary="Runners as Ray actors placed by Ray; the algorithm and the store server in the driver",
        requires=["ray>=2.40"],
    )
