"""Compatibility module for Agent Lightning 0.3's ``agentlightning.tracer.weave``.

Listed in docs/migrating-from-agent-lightning.md.

``WeaveTracer`` and its helper classes live in the agl-weave plugin (``pip install agl-weave``) and are
loaded on first access; the small functions below need no plugin.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from agl_core._compat import PluginName, import_required, module_getattr

__all__ = [
    "WeaveSpanRecordingContext",  # noqa: F822 (resolved by __getattr__)
    "WeaveTracer",  # noqa: F822
    "WeaveTracerManagedTraceServer",  # noqa: F822
    "get_timestamp_or_throw",
    "op_name_to_func_name",
    "random_project_name",
]


def _from_plugin(module: str, name: str) -> Any:
    return lambda: getattr(import_required(module, name, "agl-weave"), name)


_NAMES: dict[str, Any] = {
    "WeaveTracer": PluginName("tracer", "weave", "agl-weave"),
    "WeaveSpanRecordingContext": _from_plugin("agl_weave.recording", "WeaveSpanRecordingContext"),
    "WeaveTracerManagedTraceServer": _from_plugin("agl_weave.tracer", "WeaveTracerManagedTraceServer"),
}

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


__getattr__ = module_getattr("agl_core.tracer.weave", _NAMES)
