"""``emit_annotation``: a span of free-form key/values (rewards, tags, links, metadata)."""

from __future__ import annotations

import logging
from typing import Any

from agl_core.emitter._resolve import resolve_tracer
from agl_core.semconv import AGL_ANNOTATION
from agl_core.tracer.base import get_active_tracer as get_active_tracer  # looked up here by operation.py too
from agl_core.types import SpanCoreFields, TraceStatus
from agl_core.utils.otel import check_attributes_sanity, flatten_attributes, sanitize_attributes

__all__ = ["emit_annotation"]

logger = logging.getLogger(__name__)


def emit_annotation(annotation: dict[str, Any], propagate: bool = True) -> SpanCoreFields:
    """Emit an ``agentlightning.annotation`` span carrying ``annotation`` (flattened) as attributes.

    Nested dicts and lists of dicts become dotted keys; lists of one primitive type stay lists. Values
    must end up str/int/float/bool or homogeneous lists of them, else ``ValueError`` names the key.
    """
    attributes = flatten_attributes(annotation, expand_leaf_lists=False)
    check_attributes_sanity(attributes)
    attributes = sanitize_attributes(attributes)
    logger.debug("Emitting annotation with keys %s", list(attributes))
    tracer = resolve_tracer(propagate, "annotation span", get_active_tracer)
    return tracer.create_span(AGL_ANNOTATION, attributes=attributes, status=TraceStatus(status_code="OK"))


# Agent Lightning 0.3 defined ``operation`` and ``OperationContext`` here (the table in agl_core._moved03).
def __getattr__(name: str) -> Any:
    from agl_core._moved03 import moved_name

    return moved_name(__name__, name)
