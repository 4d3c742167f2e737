"""Which tracer an emitter writes to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agl_core.tracer.base import Tracer
from agl_core.tracer.dummy import DummyTracer
from agl_core.utils.otel import flatten_attributes, sanitize_attributes

__all__ = ["extra_attributes", "resolve_tracer"]


def resolve_tracer(propagate: bool, what: str, active_tracer: Callable[[], Tracer | None]) -> Tracer:
    """``active_tracer()`` when ``propagate``, else a fresh :class:`DummyTracer` (nothing exported).

    Each emitter module passes its own ``get_active_tracer`` global, read at call time, so code that
    patches ``agl_core.emitter.<module>.get_active_tracer`` (as 0.3's tests did) is obeyed.

    Raises ``RuntimeError("No active tracer found. Cannot emit <what>. ...")`` when ``propagate`` is set and
    no tracer is active in the current context (task or thread).
    """
    if not propagate:
        return DummyTracer()
    tracer = active_tracer()
    if tracer is None:
        raise RuntimeError(
            f"No active tracer found. Cannot emit {what}. Emit inside `async with tracer.trace_context(...)` "
            "(threads started inside it need `asyncio.to_thread` or `contextvars.copy_context().run` to "
            "inherit it), or pass propagate=False to only build the span."
        )
    return tracer


def extra_attributes(attributes: dict[str, Any] | None) -> dict[str, Any]:
    """User-supplied extra attributes, flattened (leaf lists kept) and sanitized."""
    if not attributes:
        return {}
    return sanitize_attributes(flatten_attributes(attributes, expand_leaf_lists=False))
