"""Entry point of agl-weave: registers the ``weave`` tracer (imports nothing but agl_core)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agl_core import hookimpl

if TYPE_CHECKING:
    from agl_core.registry import Registry


AGL_PLUGIN_API_VERSION = 1
"""The agl plugin contract version these hooks are built for (see `agl plugins check`)."""


@hookimpl
def agl_register_tracers(registry: Registry[Any]) -> None:
    """Register ``weave`` (:class:`agl_weave.tracer.WeaveTracer`), imported on first use."""
    registry.add(
        "weave",
        "agl_weave.tracer:WeaveTracer",
        summary="W&B Weave ops and calls (and the integrations Weave patches) -> agl store; offline",
        requires=["weave>=0.54,<0.55"],
    )
