"""agl: train and optimize AI agents with almost no change to the agent's code.

``import agl_core as agl`` gives the same top-level names as Agent Lightning 0.3. Names are
imported lazily on first access, so ``import agl_core`` stays fast and light. 0.3's machinery agl itself
does not use (the deprecated v0.1 ``AgentLightningClient``, ``AgentLightningServer``, ``DevTaskLoader``
and ``LegacyAgentRunner``, and ``CollectionBasedLightningStore``) is the agl-legacy plugin's
(``pip install agl-legacy``); every difference is listed in docs/migrating-from-agent-lightning.md.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from agl_core._log_bridge import install_log_bridge
from agl_core.hookspecs import PLUGIN_API_VERSION, hookimpl

__version__ = "0.4.0"

# A library attaches no output of its own: records under ``agl_core`` go nowhere until the application (or
# ``agl.setup_logging``) configures logging, instead of reaching Python's last-resort stderr handler.
logging.getLogger("agl_core").addHandler(logging.NullHandler())
# ... and Agent Lightning 0.3 code that configures ``agentlightning.*`` loggers gets agl's records there too.
install_log_bridge()


# public name -> module that defines it (imported on first access)
_LAZY: dict[str, str] = {
    # plugin system
    "PluginManager": "agl_core.plugins",
    "get_plugin_manager": "agl_core.plugins",
    "get_registry": "agl_core.plugins",
    "Registry": "agl_core.registry",
}

_MODULE_NAMES: dict[str, list[str]] = {
    "agl_core.adapter": [
        "Adapter",
        "LlmProxyTraceToTriplet",
        "OtelTraceAdapter",
        "TraceAdapter",
        "TraceToMessages",
        "TraceToTripletBase",
        "TracerTraceToTriplet",
    ],
    "agl_core.algorithm": ["Algorithm", "Baseline", "FastAlgorithm", "algo"],
    "agl_core.emitter": [
        "emit_annotation",
        "emit_exception",
        "emit_message",
        "emit_object",
        "emit_reward",
        "find_final_reward",
        "find_reward_spans",
        "get_message_value",
        "get_object_value",
        "get_reward_value",
        "get_rewards_from_span",
        "is_reward_span",
        "operation",
        "reward",
    ],
    "agl_core.env_var": [
        "LightningEnvVar",
        "resolve_bool_env_var",
        "resolve_int_env_var",
        "resolve_str_env_var",
    ],
    "agl_core.execution": [
        "ClientServerExecutionStrategy",
        "ExecutionEvent",
        "ExecutionStrategy",
        "MultiprocessingEvent",
        "SharedMemoryExecutionStrategy",
        "ThreadingEvent",
    ],
    "agl_core.litagent": ["LitAgent", "llm_rollout", "prompt_rollout", "rollout"],
    "agl_core.llm_proxy": ["LLMProxy"],
    "agl_core.program": ["ProgramAgent", "RolloutHooks"],
    "agl_core.runner": ["LitAgentRunner", "Runner"],
    "agl_core.store": ["LightningStore", "LightningStoreCapabilities", "LightningStoreStatistics"],
    "agl_core.store.http": ["LightningStoreClient", "LightningStoreServer"],
    "agl_core.store.memory": ["InMemoryLightningStore"],
    "agl_core.store.threading": ["LightningStoreThreaded"],
    "agl_core.tracer": [
        "DummyTracer",
        "OtelTracer",
        "Tracer",
        "clear_active_tracer",
        "get_active_tracer",
        "set_active_tracer",
    ],
    "agl_core.trainer": ["Trainer", "build_component"],
}
for _module, _names in _MODULE_NAMES.items():
    _LAZY.update(dict.fromkeys(_names, _module))

# 0.3's logging helpers under their top-level names: public name -> (module, attribute)
_RENAMED: dict[str, tuple[str, str]] = {
    "setup_logging": ("agl_core.logging", "setup"),
    "setup_module_logging": ("agl_core.logging", "setup_module"),
    "configure_logger": ("agl_core.logging", "configure_logger"),
}

# 0.3's names of machinery agl does not use, served by the agl-legacy plugin through their 0.3 modules (the
# v0.1 ones warn as in 0.3); none is in __all__, so ``from agl_core import *`` works without the plugin.
_FROM_AGL_LEGACY: dict[str, str] = {
    "AgentLightningClient": "agl_core.client",
    "DevTaskLoader": "agl_core.client",
    "AgentLightningServer": "agl_core.server",
    "LegacyAgentRunner": "agl_core.runner.legacy",
    "CollectionBasedLightningStore": "agl_core.store.collection_based",
    "lightning_cli": "agl_core.config",
}


def _plugin_factory(kind: str, name: str, public_name: str, distribution: str) -> Any:
    """A function building the plugin ``kind`` registered as ``name``; the plugin is imported when called."""

    def factory(*args: Any, **kwargs: Any) -> Any:
        from agl_core.plugins import get_registry

        return get_registry(kind).resolve(name)(*args, **kwargs)

    factory.__name__ = factory.__qualname__ = public_name
    factory.__doc__ = (
        f"Build the {kind} {name!r} from the {distribution} plugin (``pip install {distribution}``); "
        "arguments go to its constructor. A missing plugin raises UnknownComponentError naming the package."
    )
    return factory


APO = _plugin_factory("algorithm", "apo", "APO", "agl-apo")
VERL = _plugin_factory("algorithm", "verl", "VERL", "agl-verl")
AgentOpsTracer = _plugin_factory("tracer", "agentops", "AgentOpsTracer", "agl-agentops")

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

__all__ = [
    "APO",
    "PLUGIN_API_VERSION",
    "VERL",
    "AgentOpsTracer",
    "__version__",
    "hookimpl",
    *sorted([*_LAZY, *_RENAMED]),
]


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        module_name, attribute = _RENAMED[name]
        value = getattr(importlib.import_module(module_name), attribute)
        globals()[name] = value
        return value
    if name in _FROM_AGL_LEGACY:
        return getattr(importlib.import_module(_FROM_AGL_LEGACY[name]), name)  # v0.1 classes warn when used
    lazy_module = _LAZY.get(name)
    if lazy_module is None:
        raise AttributeError(f"module 'agl_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(lazy_module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_RENAMED))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from agl_core.adapter import (  # noqa: F401
        Adapter,
        LlmProxyTraceToTriplet,
        OtelTraceAdapter,
        TraceAdapter,
        TracerTraceToTriplet,
        TraceToMessages,
        TraceToTripletBase,
    )
    from agl_core.algorithm import Algorithm, Baseline, FastAlgorithm, algo  # noqa: F401
    from agl_core.emitter import (  # noqa: F401
        emit_annotation,
        emit_exception,
        emit_message,
        emit_object,
        emit_reward,
        find_final_reward,
        find_reward_spans,
        get_message_value,
        get_object_value,
        get_reward_value,
        get_rewards_from_span,
        is_reward_span,
    )
    from agl_core.emitter.operation import operation  # noqa: F401
    from agl_core.emitter.reward import reward  # noqa: F401
    from agl_core.env_var import (  # noqa: F401
        LightningEnvVar,
        resolve_bool_env_var,
        resolve_int_env_var,
        resolve_str_env_var,
    )
    from agl_core.execution import (  # noqa: F401
        ClientServerExecutionStrategy,
        ExecutionEvent,
        ExecutionStrategy,
        MultiprocessingEvent,
        SharedMemoryExecutionStrategy,
        ThreadingEvent,
    )
    from agl_core.litagent import LitAgent, llm_rollout, prompt_rollout, rollout  # noqa: F401
    from agl_core.llm_proxy import LLMProxy  # noqa: F401
    from agl_core.logging import configure_logger  # noqa: F401
    from agl_core.logging import setup as setup_logging  # noqa: F401
    from agl_core.logging import setup_module as setup_module_logging  # noqa: F401
    from agl_core.plugins import PluginManager, get_plugin_manager, get_registry  # noqa: F401
    from agl_core.program import ProgramAgent, RolloutHooks  # noqa: F401
    from agl_core.registry import Registry  # noqa: F401
    from agl_core.runner import LitAgentRunner, Runner  # noqa: F401
    from agl_core.store import (  # noqa: F401
        LightningStore,
        LightningStoreCapabilities,
        LightningStoreStatistics,
    )
    from agl_core.store.http import LightningStoreClient, LightningStoreServer  # noqa: F401
    from agl_core.store.memory import InMemoryLightningStore  # noqa: F401
    from agl_core.store.threading import LightningStoreThreaded  # noqa: F401
    from agl_core.tracer import (  # noqa: F401
        DummyTracer,
        OtelTracer,
        Tracer,
        clear_active_tracer,
        get_active_tracer,
        set_active_tracer,
    )
    from agl_core.trainer import Trainer, build_component  # noqa: F401
    from agl_core.types import *  # noqa: F403
