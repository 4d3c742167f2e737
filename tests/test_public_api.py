"""`import agl_core as agl` exposes Agent Lightning 0.3's top-level names.

0.3's legacy runner and collection-based store are the agl-legacy plugin's; without it they answer with
its ``pip install`` line (docs/migrating-from-agent-lightning.md).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

import agl_core as agl
from agl_core.plugins import PluginManager

EXPECTED = {
    "adapter": "TraceAdapter OtelTraceAdapter Adapter TraceToTripletBase TracerTraceToTriplet "
    "LlmProxyTraceToTriplet TraceToMessages",
    "algorithm": "Algorithm algo FastAlgorithm Baseline APO VERL",
    "emitter": "reward operation emit_reward get_reward_value get_rewards_from_span is_reward_span "
    "find_reward_spans find_final_reward emit_message emit_object emit_exception emit_annotation "
    "get_message_value get_object_value",
    "env_var": "LightningEnvVar resolve_bool_env_var resolve_int_env_var resolve_str_env_var",
    "execution": "ExecutionStrategy ClientServerExecutionStrategy ExecutionEvent ThreadingEvent "
    "MultiprocessingEvent SharedMemoryExecutionStrategy",
    "litagent": "LitAgent llm_rollout prompt_rollout rollout",
    "llm_proxy": "LLMProxy",
    "runner": "Runner LitAgentRunner",
    "store": "LightningStore LightningStoreCapabilities LightningStoreStatistics LightningStoreClient "
    "LightningStoreServer InMemoryLightningStore LightningStoreThreaded",
    "logging": "setup_logging setup_module_logging configure_logger",
    "tracer": "AgentOpsTracer Tracer OtelTracer DummyTracer get_active_tracer set_active_tracer "
    "clear_active_tracer",
    "trainer": "Trainer build_component",
    "types": "Triplet RolloutLegacy Task TaskInput TaskIfAny RolloutRawResultLegacy RolloutRawResult "
    "RolloutMode GenericResponse ParallelWorkerBase Dataset AttemptStatus RolloutStatus "
    "RolloutConfig Rollout Attempt AttemptedRollout EnqueueRolloutRequest Hook Worker "
    "WorkerStatus PaginatedResult FilterOptions SortOptions FilterField Resource LLM ProxyLLM "
    "PromptTemplate ResourceUnion NamedResources ResourcesUpdate AttributeValue Attributes "
    "TraceState SpanContext TraceStatus Event Link OtelResource Span SpanNames "
    "SpanAttributeNames SpanLike StatusCode SpanCoreFields SpanRecordingContext",
    "version": "__version__",
}

ALL_EXPECTED = sorted({name for names in EXPECTED.values() for name in names.split()})


@pytest.mark.parametrize("name", ALL_EXPECTED)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(agl, name) is not None
    assert name in agl.__all__
    assert name in dir(agl)


def test_names_resolve_to_the_implementations() -> None:
    from agl_core.store.memory import InMemoryLightningStore
    from agl_core.trainer import Trainer

    assert agl.Trainer is Trainer
    assert agl.InMemoryLightningStore is InMemoryLightningStore
    assert (
        callable(agl.reward) and agl.reward.__module__ == "agl_core.emitter.reward"
    )  # not shadowed (quirk 15)


def test_legacy_names_answer_with_the_install_line_of_agl_legacy() -> None:
    if importlib.util.find_spec("agl_legacy") is not None:
        pytest.skip("agl-legacy is installed; its own tests check these names")
    for name in (
        "LegacyAgentRunner",
        "CollectionBasedLightningStore",
        "AgentLightningClient",
        "lightning_cli",
    ):
        with pytest.raises(ImportError, match="pip install agl-legacy"):
            getattr(agl, name)
    assert "LegacyAgentRunner" not in agl.__all__  # so ``from agl_core import *`` works without it


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        agl.Nope  # noqa: B018


@pytest.mark.parametrize(
    ("factory", "distribution"),
    [("APO", "agl-apo"), ("VERL", "agl-verl"), ("AgentOpsTracer", "agl-agentops")],
)
def test_plugin_factories_without_the_plugin_say_what_to_install(
    factory: str, distribution: str, plugin_manager: PluginManager
) -> None:
    with pytest.raises(Exception, match=f"pip install {distribution}"):
        getattr(agl, factory)()


def test_plugin_factories_build_the_registered_component(plugin_manager: PluginManager) -> None:
    class FakeApo(agl.Algorithm):
        def __init__(self, client: object, *, beam_width: int = 1) -> None:
            self.client, self.beam_width = client, beam_width

    plugin_manager.registry("algorithm").add("apo", FakeApo)
    built = agl.APO("client", beam_width=3)
    assert isinstance(built, FakeApo) and (built.client, built.beam_width) == ("client", 3)


def test_importing_the_package_stays_light() -> None:
    code = (
        "import sys, agl_core; heavy = [m for m in ('openai', 'opentelemetry.sdk', 'aiohttp', 'rich') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
