"""0.3's per-library instrumentation modules: importable everywhere, working where their library is.

LiteLLM is not installed in the core test venv, so its OpenTelemetry callback class is stood in by a
minimal module with the same name and method; the spans are real OpenTelemetry SDK spans.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

import agl_core.instrumentation as instrumentation
from agl_core.instrumentation.agentops import instrument_agentops, uninstrument_agentops
from agl_core.instrumentation.agentops_langchain import instrument_agentops_langchain
from agl_core.instrumentation.litellm import instrument_litellm, uninstrument_litellm
from agl_core.instrumentation.vllm import instrument_vllm, uninstrument_vllm


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
        (instrument_agentops_langchain, "agentops", "pip install agl-agentops"),
        (instrument_litellm, "litellm", "pip install litellm"),
        (instrument_vllm, "vllm", "pip install 'vllm>=0.10.2'"),
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


@pytest.fixture
def litellm_callback(monkeypatch: pytest.MonkeyPatch) -> type:
    class OpenTelemetry:
        def set_attributes(self, span: Any, kwargs: Any, response_obj: Any) -> None:
            span.set_attribute("gen_ai.request.model", kwargs["model"])

    modules = {
        "litellm": types.ModuleType("litellm"),
        "litellm.integrations": types.ModuleType("litellm.integrations"),
        "litellm.integrations.opentelemetry": types.ModuleType("litellm.integrations.opentelemetry"),
    }
    modules["litellm.integrations.opentelemetry"].OpenTelemetry = OpenTelemetry  # type: ignore[attr-defined]
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    yield OpenTelemetry
    uninstrument_litellm()


def test_litellm_spans_get_token_ids(litellm_callback: type) -> None:
    original = litellm_callback.set_attributes
    instrument_litellm()
    instrument_litellm()  # idempotent
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("litellm") as span:
        response = {"prompt_token_ids": [1, 2], "response_token_ids": [[3, 4, 5]]}
        litellm_callback().set_attributes(span, {"model": "m"}, response)
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.request.model"] == "m"
    assert list(attributes["prompt_token_ids"]) == [1, 2]
    assert list(attributes["response_token_ids"]) == [3, 4, 5]
    uninstrument_litellm()
    assert litellm_callback.set_attributes is original


def test_vllm_uninstrument_is_a_no_op() -> None:
    assert uninstrument_vllm() is None
