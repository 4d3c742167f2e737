"""Every public name of Agent Lightning 0.3 (top level and each module's ``__all__``) imports from the same
path under ``agl_core``: it resolves, or it is a plugin's (ImportError with the ``pip install`` hint), or
agl dropped it (``NotProvidedError`` naming the replacement). Every 0.3 module imports.

The lists are 0.3.0's, read from its sources with ``bench/compat_surface.py``'s ``Surface``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import warnings

import pytest

from agl_core._compat import NotProvidedError
from agl_core.plugins import PluginManager

ALL_03: dict[str, list[str]] = {
    "agl_core.adapter": [
        "TraceAdapter",
        "OtelTraceAdapter",
        "Adapter",
        "TraceToTripletBase",
        "TracerTraceToTriplet",
        "LlmProxyTraceToTriplet",
        "TraceToMessages",
    ],
    "agl_core.algorithm": ["Algorithm", "algo", "FastAlgorithm", "Baseline", "APO", "VERL"],
    "agl_core.algorithm.apo": ["APO"],
    "agl_core.algorithm.fast": ["FastAlgorithm", "Baseline"],
    "agl_core.algorithm.verl": ["VERL"],
    "agl_core.config": ["lightning_cli"],
    "agl_core.emitter": [
        "reward",
        "operation",
        "emit_reward",
        "get_reward_value",
        "get_rewards_from_span",
        "is_reward_span",
        "find_reward_spans",
        "find_final_reward",
        "emit_message",
        "emit_object",
        "emit_exception",
        "emit_annotation",
        "get_message_value",
        "get_object_value",
    ],
    "agl_core.emitter.reward": [
        "reward",
        "emit_reward",
        "get_reward_value",
        "get_rewards_from_span",
        "is_reward_span",
        "find_reward_spans",
        "find_final_reward",
    ],
    "agl_core.env_var": [
        "LightningEnvVar",
        "resolve_bool_env_var",
        "resolve_int_env_var",
        "resolve_str_env_var",
    ],
    "agl_core.execution": [
        "ExecutionStrategy",
        "ClientServerExecutionStrategy",
        "ExecutionEvent",
        "ThreadingEvent",
        "MultiprocessingEvent",
        "SharedMemoryExecutionStrategy",
    ],
    "agl_core.instrumentation.agentops": ["instrument_agentops", "uninstrument_agentops"],
    "agl_core.instrumentation.agentops_langchain": [
        "instrument_agentops_langchain",
        "uninstrument_agentops_langchain",
    ],
    "agl_core.instrumentation.litellm": ["instrument_litellm", "uninstrument_litellm"],
    "agl_core.instrumentation.vllm": ["instrument_vllm", "uninstrument_vllm"],
    "agl_core.instrumentation.weave": ["instrument_weave", "uninstrument_weave", "InMemoryWeaveTraceServer"],
    "agl_core.litagent": ["LitAgent", "llm_rollout", "prompt_rollout", "rollout"],
    "agl_core.litagent.decorator": ["llm_rollout", "prompt_rollout", "rollout"],
    "agl_core.litagent.litagent": ["LitAgent"],
    "agl_core.llm_proxy": ["LLMProxy"],
    "agl_core.logging": ["setup", "configure_logger", "setup_module"],
    "agl_core.runner": ["Runner", "LegacyAgentRunner", "LitAgentRunner"],
    "agl_core.runner.legacy": ["LegacyAgentRunner"],
    "agl_core.store": [
        "LightningStore",
        "LightningStoreCapabilities",
        "LightningStoreStatistics",
        "LightningStoreClient",
        "LightningStoreServer",
        "InMemoryLightningStore",
        "CollectionBasedLightningStore",
        "LightningStoreThreaded",
    ],
    "agl_core.store.collection": [
        "AtomicLabels",
        "AtomicMode",
        "Collection",
        "Queue",
        "KeyValue",
        "FilterOptions",
        "SortOptions",
        "PaginatedResult",
        "LightningCollections",
        "ListBasedCollection",
        "DequeBasedQueue",
        "DictBasedKeyValue",
        "InMemoryLightningCollections",
    ],
    "agl_core.tracer": [
        "AgentOpsTracer",
        "Tracer",
        "OtelTracer",
        "DummyTracer",
        "get_active_tracer",
        "set_active_tracer",
        "clear_active_tracer",
    ],
    "agl_core.trainer": ["Trainer", "build_component"],
    "agl_core.trainer.init_utils": [
        "OptionalDefaults",
        "build_component",
        "instantiate_component",
        "instantiate_from_spec",
        "load_class",
    ],
    "agl_core.types.core": [
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
    ],
    "agl_core.types.resources": [
        "Resource",
        "LLM",
        "ProxyLLM",
        "PromptTemplate",
        "ResourceUnion",
        "NamedResources",
        "ResourcesUpdate",
    ],
    "agl_core.types.tracer": [
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
    ],
    "agl_core.utils.id": ["generate_id"],
    "agl_core.utils.otel": [
        "full_qualified_name",
        "get_tracer_provider",
        "get_tracer",
        "make_tag_attributes",
        "extract_tags_from_attributes",
        "make_link_attributes",
        "query_linked_spans",
        "extract_links_from_attributes",
        "filter_attributes",
        "filter_and_unflatten_attributes",
        "flatten_attributes",
        "unflatten_attributes",
        "sanitize_attribute_value",
        "sanitize_attributes",
        "sanitize_list_attribute_sanity",
        "check_attributes_sanity",
        "format_exception_attributes",
    ],
    "agl_core.utils.server_launcher": ["PythonServerLauncher", "PythonServerLauncherArgs", "LaunchMode"],
}
MODULES_03 = [
    "agl_core",
    "agl_core.adapter",
    "agl_core.adapter.base",
    "agl_core.adapter.messages",
    "agl_core.adapter.triplet",
    "agl_core.algorithm",
    "agl_core.algorithm.apo",
    "agl_core.algorithm.apo.apo",
    "agl_core.algorithm.base",
    "agl_core.algorithm.decorator",
    "agl_core.algorithm.fast",
    "agl_core.algorithm.utils",
    "agl_core.algorithm.verl",
    "agl_core.algorithm.verl.interface",
    "agl_core.cli",
    "agl_core.cli.prometheus",
    "agl_core.cli.store",
    "agl_core.cli.vllm",
    "agl_core.client",
    "agl_core.config",
    "agl_core.emitter",
    "agl_core.emitter.annotation",
    "agl_core.emitter.exception",
    "agl_core.emitter.message",
    "agl_core.emitter.object",
    "agl_core.emitter.reward",
    "agl_core.env_var",
    "agl_core.execution",
    "agl_core.execution.base",
    "agl_core.execution.client_server",
    "agl_core.execution.events",
    "agl_core.execution.inter_process",
    "agl_core.execution.shared_memory",
    "agl_core.instrumentation",
    "agl_core.instrumentation.agentops",
    "agl_core.instrumentation.agentops_langchain",
    "agl_core.instrumentation.litellm",
    "agl_core.instrumentation.vllm",
    "agl_core.instrumentation.weave",
    "agl_core.litagent",
    "agl_core.litagent.decorator",
    "agl_core.litagent.litagent",
    "agl_core.llm_proxy",
    "agl_core.logging",
    "agl_core.reward",
    "agl_core.runner",
    "agl_core.runner.agent",
    "agl_core.runner.base",
    "agl_core.runner.legacy",
    "agl_core.semconv",
    "agl_core.server",
    "agl_core.store",
    "agl_core.store.base",
    "agl_core.store.client_server",
    "agl_core.store.collection",
    "agl_core.store.collection.base",
    "agl_core.store.collection.memory",
    "agl_core.store.collection.mongo",
    "agl_core.store.collection_based",
    "agl_core.store.memory",
    "agl_core.store.mongo",
    "agl_core.store.sqlite",
    "agl_core.store.threading",
    "agl_core.store.utils",
    "agl_core.tracer",
    "agl_core.tracer.agentops",
    "agl_core.tracer.base",
    "agl_core.tracer.dummy",
    "agl_core.tracer.otel",
    "agl_core.tracer.weave",
    "agl_core.trainer",
    "agl_core.trainer.init_utils",
    "agl_core.trainer.legacy",
    "agl_core.trainer.registry",
    "agl_core.trainer.trainer",
    "agl_core.types",
    "agl_core.types.core",
    "agl_core.types.resources",
    "agl_core.types.tracer",
    "agl_core.utils",
    "agl_core.utils.id",
    "agl_core.utils.metrics",
    "agl_core.utils.otel",
    "agl_core.utils.otlp",
    "agl_core.utils.server_launcher",
    "agl_core.utils.system_snapshot",
]
TOP_LEVEL_03 = [
    "APO",
    "Adapter",
    "AgentLightningClient",
    "AgentLightningServer",
    "AgentOpsTracer",
    "Algorithm",
    "Baseline",
    "ClientServerExecutionStrategy",
    "CollectionBasedLightningStore",
    "DevTaskLoader",
    "DummyTracer",
    "ExecutionEvent",
    "ExecutionStrategy",
    "FastAlgorithm",
    "InMemoryLightningStore",
    "LLMProxy",
    "LegacyAgentRunner",
    "LightningEnvVar",
    "LightningStore",
    "LightningStoreCapabilities",
    "LightningStoreClient",
    "LightningStoreServer",
    "LightningStoreStatistics",
    "LightningStoreThreaded",
    "LitAgent",
    "LitAgentRunner",
    "LlmProxyTraceToTriplet",
    "MultiprocessingEvent",
    "OtelTraceAdapter",
    "OtelTracer",
    "Runner",
    "SharedMemoryExecutionStrategy",
    "ThreadingEvent",
    "TraceAdapter",
    "TraceToMessages",
    "TraceToTripletBase",
    "Tracer",
    "TracerTraceToTriplet",
    "Trainer",
    "VERL",
    "__version__",
    "algo",
    "build_component",
    "clear_active_tracer",
    "configure_logger",
    "emit_annotation",
    "emit_exception",
    "emit_message",
    "emit_object",
    "emit_reward",
    "find_final_reward",
    "find_reward_spans",
    "get_active_tracer",
    "get_message_value",
    "get_object_value",
    "get_reward_value",
    "get_rewards_from_span",
    "is_reward_span",
    "lightning_cli",
    "llm_rollout",
    "operation",
    "prompt_rollout",
    "resolve_bool_env_var",
    "resolve_int_env_var",
    "resolve_str_env_var",
    "reward",
    "rollout",
    "set_active_tracer",
    "setup_logging",
    "setup_module_logging",
]

# 0.3 callables and the parameter names 0.3 code passes by keyword
SIGNATURES_03: dict[tuple[str, str], list[str]] = {
    ("agl_core", "LLMProxy"): ["port", "model_list", "store", "host", "callbacks"],
    (
        "agl_core",
        "LightningStoreServer",
    ): [
        "store",
        "host",
        "port",
        "cors_allow_origins",
        "launch_mode",
        "launcher_args",
        "n_workers",
        "tracker",
    ],
    (
        "agl_core",
        "InMemoryLightningStore",
    ): [
        "thread_safe",
        "eviction_memory_threshold",
        "safe_memory_threshold",
        "span_size_estimator",
        "tracker",
        "scan_debounce_seconds",
    ],
    ("agl_core", "emit_object"): ["object", "attributes", "propagate"],
    ("agl_core", "resolve_bool_env_var"): ["env_var", "override", "fallback"],
    ("agl_core", "resolve_int_env_var"): ["env_var", "override", "fallback"],
    ("agl_core", "resolve_str_env_var"): ["env_var", "override", "fallback"],
    ("agl_core.utils.otel", "flatten_attributes"): ["nested_data"],
    ("agl_core.utils.otel", "unflatten_attributes"): ["flat_data"],
    ("agl_core.utils.otel", "sanitize_attribute_value"): ["object"],
    (
        "agl_core",
        "setup_logging",
    ): [
        "level",
        "console",
        "color",
        "propagate",
        "disable_existing_loggers",
        "capture_warnings",
        "submodule_levels",
        "extra_handlers",
        "formatter",
        "apply_to",
        "files",
    ],
    ("agl_core", "setup_module_logging"): [
        "level",
        "name",
        "console",
        "color",
        "propagate",
        "disable_existing_loggers",
    ],
    ("agl_core.adapter.trace_tree", "TraceTree"): ["id", "span", "children"],
    (
        "agl_core",
        "TracerTraceToTriplet",
    ): [
        "repair_hierarchy",
        "llm_call_match",
        "agent_match",
        "exclude_llm_call_in_reward",
        "reward_match",
        "_skip_empty_token_spans",
    ],
}


def _resolve(module: str, name: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # agl_core.reward warns on import, as in 0.3
        mod = importlib.import_module(module)
    try:
        getattr(mod, name)
    except NotProvidedError as exc:
        return "plugin" if "pip install agl-" in str(exc) else "not_provided"
    except ImportError as exc:
        assert "pip install agl-" in str(exc), exc
        return "plugin"
    return "ok"


# agl_core.reward (deprecated in 0.3) is imported in a subprocess by test_plugin_and_dropped_names:
# importing it sets ``agl_core.reward`` to the module for the rest of the process, as in 0.3.
IN_PROCESS_MODULES = [m for m in MODULES_03 if m != "agl_core.reward"]


@pytest.mark.parametrize("module", IN_PROCESS_MODULES)
def test_every_03_module_imports(module: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        importlib.import_module(module)


@pytest.mark.parametrize(("module", "names"), sorted(ALL_03.items()))
def test_every_name_of_every_03_module_resolves_or_explains(
    module: str, names: list[str], plugin_manager: PluginManager
) -> None:
    outcomes = {name: _resolve(module, name) for name in names}
    assert set(outcomes.values()) <= {"ok", "plugin", "not_provided"}


# 0.3's top-level names of machinery agl itself does not use: the agl-legacy plugin provides them.
TOP_LEVEL_LEGACY = {
    "AgentLightningClient",
    "AgentLightningServer",
    "CollectionBasedLightningStore",
    "DevTaskLoader",
    "LegacyAgentRunner",
    "lightning_cli",
}


def test_top_level_names() -> None:
    outcomes = {name: _resolve("agl_core", name) for name in TOP_LEVEL_03}
    expected = "ok" if importlib.util.find_spec("agl_legacy") else "plugin"
    assert {name: outcomes[name] for name in TOP_LEVEL_LEGACY} == dict.fromkeys(TOP_LEVEL_LEGACY, expected)
    assert {name for name, outcome in outcomes.items() if outcome != "ok"} <= TOP_LEVEL_LEGACY


@pytest.mark.parametrize(("where", "params"), sorted(SIGNATURES_03.items()))
def test_03_keyword_arguments_are_accepted(where: tuple[str, str], params: list[str]) -> None:
    target = getattr(importlib.import_module(where[0]), where[1])
    accepted = inspect.signature(target).parameters
    missing = [p for p in params if p not in accepted]
    assert not missing, f"{where[0]}.{where[1]} does not accept {missing}"
