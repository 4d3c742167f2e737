"""Compatibility module for Agent Lightning 0.3's ``agentlightning.tracer.weave``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from agl_core._compat import module_getattr

__all__ = []

_NAMES: dict[str, Any] = {}

_REASON = (
    "agl has no Weave tracer; OtelTracer (the default) records every OpenTelemetry span, so export "
    "Weave's OpenTelemetry spans or use the LLM proxy"
)

_DROPPED: dict[str, str] = dict.fromkeys(
    ["WeaveTracer", "WeaveSpanRecordingContext", "WeaveTracerManagedTraceServer"], _REASON
)

_OP_NAME = re.compile(r"/([^/:]+):")


def op_name_to_func_name(op_name: str) -> str:
    """The function name in a Weave op reference (``weave:///.../op/<name>:<digest>``), else ``op_name``."""
    match = _OP_NAME.search(op_name)
    return match.group(1) if match else op_name


def random_project_name() -> str:
    """A fresh Weave project name, ``agl/weave-<12 random characters>``."""
    from agl_core.utils.id import generate_id

    return "agl/weave-" + generate_id(12)


def get_timestamp_or_throw(date: datetime | None, field_name: str) -> float:
    """``date`` as seconds since the epoch; `ValueError` naming ``field_name`` when it is None."""
    if date is None:
        raise ValueError(f"{field_name} is required but not set")
    return date.timestamp()


__getattr__ = module_getattr("agl_core.tracer.weave", _NAMES, _DROPPED)
