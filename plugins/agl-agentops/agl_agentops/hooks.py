"""Entry point of agl-agentops: registers the ``agentops`` tracer (imports nothing but agl_core)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agl_core import hookimpl

if TYPE_CHECKING:
    from agl_core.registry import Registry


AGL_PLUGIN_API_VERSION = 1
"""The agl plugin contract version these hooks are built for (see `agl plugins check`)."""


@hookimpl
def agl_register_tracers(registry: Registry[Any]) -> None:
    """Register ``agentops`` (:class:`agl_agentops.tracer.AgentOpsTracer`), imported on first use."""
    registry.add(
        "agentops",
        "agl_agentops.tracer:AgentOpsTracer",
        summary="AgentOps SDK instrumentation (OpenAI, Anthropic, LangChain, CrewAI, ...) -> agl store; "
        "optional export to AgentOps",
        requires=["agentops>=0.4.21"],
    )
