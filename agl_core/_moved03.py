"""The one table of Agent Lightning 0.3 names that 0.3 defined in a core module and agl defines elsewhere.

A leaf module (it imports no agl_core module), so any core module's ``__getattr__`` can use it. The thin
modules at 0.3's own import paths use `agl_core._compat` instead.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["MOVED_03", "moved_name"]

MOVED_03: dict[str, dict[str, str]] = {
    "agl_core.types.core": dict.fromkeys(
        ("GenericResponse", "RolloutLegacy", "RolloutRawResultLegacy", "Task", "TaskIfAny"),
        "agl_core.types.legacy",
    ),
    "agl_core.adapter.triplet": {"LlmProxyTraceToTriplet": "agl_core.adapter.proxy_triplet"},
    "agl_core.adapter.messages": dict.fromkeys(
        ("convert_to_openai_messages", "group_genai_dict"), "agl_core.adapter.messages_03"
    ),
    "agl_core.algorithm.fast": {"Baseline": "agl_core.algorithm.baseline"},
    "agl_core.emitter.annotation": dict.fromkeys(
        ("operation", "OperationContext"), "agl_core.emitter.operation"
    ),
    "agl_core.tracer": {"AgentOpsTracer": "agl_core.tracer.agentops", "WeaveTracer": "agl_core.tracer.weave"},
}
"""The one table of 0.3 names that 0.3 defined in a core module and agl defines elsewhere.

Core module -> {0.3 name -> the module that defines it now}; the module's ``__getattr__`` calls
`moved_name`.
"""


def moved_name(module: str, name: str) -> Any:
    """``module.name`` for a 0.3 name `MOVED_03` lists (each listed module's ``__getattr__`` calls this).

    Raises:
        AttributeError: ``module`` has no such 0.3 name.
    """
    source = MOVED_03.get(module, {}).get(name)
    if source is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return getattr(importlib.import_module(source), name)
