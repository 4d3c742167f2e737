"""agl: train and optimize AI agents with almost no change to the agent's code.

``import agl_core as agl`` gives the same top-level names as Agent Lightning 0.3. Names are
imported lazily on first access, so ``import agl_core`` stays fast and light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agl_core.hookspecs import hookimpl

__version__ = "0.4.0"

PLUGIN_API_VERSION = 1
"""Version of the plugin contract in :mod:`agl_core.hookspecs`; bumped on incompatible changes."""

# public name -> module that defines it (imported on first access)
_LAZY: dict[str, str] = {
    # plugin system
    "PluginManager": "agl_core.plugins",
    "get_plugin_manager": "agl_core.plugins",
    "get_registry": "agl_core.plugins",
    "Registry": "agl_core.registry",
}

_TYPE_NAMES = [
    "Triplet",
    "RolloutLegacy",
    "Task",
    "TaskInput",
    "TaskIfAny",
    "RolloutRawResultLegacy",
    "RolloutRawResult",
    "RolloutMode",
    "GenericResponse",
    "ParallelWorkerBase",
    "Dataset",
    "AttemptStatus",
    "RolloutStatus",
    "RolloutConfig",
    "Rollout",
    "Attempt",
    "AttemptedRollout",
    "EnqueueRolloutRequest",
    "Hook",
    "Worker",
    "WorkerStatus",
    "PaginatedResult",
    "FilterOptions",
    "SortOptions",
    "FilterField",
    "Resource",
    "LLM",
    "ProxyLLM",
    "PromptTemplate",
    "ResourceUnion",
    "NamedResources",
    "ResourcesUpdate",
    "AttributeValue",
    "Attributes",
    "TraceState",
    "SpanContext",
    "TraceStatus",
    "Event",
    "Link",
    "OtelResource",
    "Span",
    "SpanNames",
    "SpanAttributeNames",
    "SpanLike",
    "StatusCode",
    "SpanCoreFields",
    "SpanRecordingContext",
]
_LAZY.update(dict.fromkeys(_TYPE_NAMES, "agl_core.types"))

__all__ = ["PLUGIN_API_VERSION", "__version__", "hookimpl", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'agl_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from agl_core.plugins import PluginManager, get_plugin_manager, get_registry  # noqa: F401
    from agl_core.registry import Registry  # noqa: F401
    from agl_core.types import *  # noqa: F403
