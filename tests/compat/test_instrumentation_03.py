"""0.3's per-library instrumentation modules: importable everywhere, working where their library is.

The LiteLLM, vLLM and AgentOps-LangChain helpers are agl-legacy's (its tests/test_helpers_03.py).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

import agl_core.instrumentation as instrumentation
from agl_core.instrumentation.agentops import instrument_agentops, uninstrument_agentops


def instrument_weave_without_plugin() -> None:
    from agl_core.instrumentation.weave import instrument_weave  # noqa: F401


def server_class_without_plugin() -> None:
    from agl_core.instrumentation.weave import InMemoryWeaveTraceServer  # noqa: F401


def recording_class_without_plugin() -> None:
    from agl_core.tracer.weave import WeaveSpanRecordingContext  # noqa: F401


def test_installed_flags_are_booleans_as_in_03() -> None:
    for flag in ("AGENTOPS_INSTALLED", "AGENTOPS_LANGCHAIN_INSTALLED", "LITELLM_INSTALLED"):
        assert isinstance(getattr(instrumentation, flag), bool)
    assert instrumentation.LITELLM_INSTALLED is (importlib.util.find_spec("litellm") is not None)
    # 0.3 never set these two.
    assert instrumentation.VLLM_INSTALLED is False and instrumentation.WEAVE_INSTALLED is False


@pytest.mark.parametrize(
    ("call", "module", "hint"),
    [
        (instrument_agentops, "agl_agentops", "pip install agl-agentops"),
        (uninstrument_agentops, "agl_agentops", "pip install agl-agentops"),
        (instrument_weave_without_plugin, "agl_weave", "pip install agl-weave"),
        (server_class_without_plugin, "agl_weave", "pip install agl-weave"),
        (recording_class_without_plugin, "agl_weave", "pip install agl-weave"),
    ],
)
def test_missing_library_names_the_package_to_install(call: Any, module: str, hint: str) -> None:
    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed")
    with pytest.raises(ImportError, match=hint.replace("(", r"\(").replace("'", "'")):
        call()
