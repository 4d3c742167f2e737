"""0.3's helpers that live in agl-legacy (``lightning_cli``, the message helpers, the LiteLLM, vLLM and
AgentOps-LangChain instrumentation), used from their 0.3 paths the way 0.3 code used them.

LiteLLM is not installed in the test venv, so its OpenTelemetry callback class is stood in by a minimal
module with the same name and method; the spans are real OpenTelemetry SDK spans.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

import agl_core as agl
from agl_core.adapter.messages import convert_to_openai_messages, group_genai_dict
from agl_core.instrumentation.agentops_langchain import instrument_agentops_langchain
from agl_core.instrumentation.litellm import instrument_litellm, uninstrument_litellm
from agl_core.instrumentation.vllm import instrument_vllm, uninstrument_vllm


class Model:
    def __init__(
        self, name: str, temperature: float | None = None, layers: list[int] | None = None, tiny: bool = False
    ) -> None:
        self.name, self.temperature, self.layers, self.tiny = name, temperature, layers, tiny


class Run:
    def __init__(self, epochs: int = 1, tag: str | None = "x") -> None:
        self.epochs, self.tag = epochs, tag


def test_lightning_cli_builds_instances_from_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["prog", "--model.name", "qwen", "--model.temperature", "null", "--model.layers", "1", "2",
            "--model.tiny", "yes", "--run.epochs", "3", "--run.tag", "~"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    model, run = agl.lightning_cli(Model, Run)
    assert (model.name, model.temperature, model.layers, model.tiny) == ("qwen", None, [1, 2], True)
    assert (run.epochs, run.tag) == (3, None)
    monkeypatch.setattr(sys, "argv", ["prog"])
    with pytest.raises(SystemExit):  # --model.name is required
        agl.lightning_cli(Model)
    assert agl.lightning_cli() == ()


def test_group_genai_dict_nests_flattened_attributes() -> None:
    flat = {
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "be brief",
        "gen_ai.prompt.2.role": "user",  # a gap in the indices closes up
        "gen_ai.prompt.2.content": "hi",
        "gen_ai.request.model": "m",
    }
    assert group_genai_dict(flat, "gen_ai.prompt") == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert group_genai_dict({"gen_ai.usage.in.tokens": 3, "gen_ai.usage.out": 4}, "gen_ai.usage") == {
        "in": {"tokens": 3},
        "out": 4,
    }


def test_convert_to_openai_messages_builds_fine_tuning_samples() -> None:
    record = {
        "prompt": [{"role": "user", "content": "weather?"}],
        "completion": [{"role": "assistant", "content": None}],
        "request": {"functions": [{"name": "get_weather", "parameters": '{"type": "object"}'}]},
        "response": {},
        "tools": [{"name": "get_weather", "parameters": "{}", "call": {"id": "c1", "type": "function"}}],
    }
    (sample,) = convert_to_openai_messages([record])
    assert sample["messages"][-1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert sample["tools"] == [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "", "parameters": {"type": "object"}},
        }
    ]


@pytest.mark.parametrize(
    ("call", "module", "hint"),
    [
        (instrument_agentops_langchain, "agentops", "pip install agl-agentops"),
        (instrument_litellm, "litellm", "pip install litellm"),
        (instrument_vllm, "vllm", "pip install 'vllm>=0.10.2'"),
    ],
)
def test_missing_library_names_the_package_to_install(call: Any, module: str, hint: str) -> None:
    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed")
    with pytest.raises(ImportError, match=hint.replace("(", r"\(")):
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
