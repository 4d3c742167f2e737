"""TraceToMessages: samples in the OpenAI fine-tuning format that a chat template renders."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageParam
from pydantic import TypeAdapter

from agl_core.adapter import TraceToMessages
from tests.adapter.test_triplet import CALL, SYSTEM, TOOLS, multi_agent_trace
from tests.adapter.traces import TraceBuilder, user

# A ChatML template with Qwen-style tool calls (tools listed in the system turn).
CHATML = (
    "{% if tools %}<|im_start|>system\n"
    "{% if messages[0].role == 'system' %}{{ messages[0].content }}\n{% endif %}"
    "# Tools\n{% for tool in tools %}{{ tool.function | tojson }}\n{% endfor %}<|im_end|>\n"
    "{% endif %}"
    "{% for m in messages %}{% if not (tools and loop.first and m.role == 'system') %}"
    "<|im_start|>{{ m.role }}\n"
    "{% if m.content is string %}{{ m.content }}"
    "{% elif m.content %}{% for p in m.content %}"
    "{% if p.type == 'text' %}{{ p.text }}{% else %}<image>{% endif %}{% endfor %}"
    "{% endif %}"
    "{% for c in m.tool_calls or [] %}"
    '<tool_call>{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments }}}</tool_call>'
    "{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}"
)


def render(sample: dict[str, Any]) -> str:
    env = ImmutableSandboxedEnvironment()
    return env.from_string(CHATML).render(messages=sample["messages"], tools=sample["tools"])


def as_openai(sample: dict[str, Any]) -> None:
    """Validate against the openai package's own request types (raises if the format is wrong)."""
    messages = TypeAdapter(list[ChatCompletionMessageParam])
    json.loads(messages.dump_json(messages.validate_python(sample["messages"])))
    if sample["tools"] is not None:
        TypeAdapter(list[ChatCompletionFunctionToolParam]).validate_python(sample["tools"])


def test_multi_agent_trace_becomes_fine_tuning_samples_with_tools() -> None:
    samples = TraceToMessages().adapt(multi_agent_trace().spans())
    assert len(samples) == 4
    for sample in samples:
        as_openai(dict(sample))
    first, summary, final, critique = samples
    assert first == {
        "messages": [
            SYSTEM,
            user("Plan a trip"),
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
        ],
        "tools": TOOLS,
    }
    assert summary["tools"] is None
    assert final["messages"][-3:] == [
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Paris is nice"},
        {"role": "assistant", "content": "Go to Paris"},
    ]
    assert critique["messages"][-1] == {"role": "assistant", "content": "Looks good"}


def test_samples_render_through_a_chat_template() -> None:
    samples = TraceToMessages().adapt(multi_agent_trace().spans())
    tool_json = json.dumps(TOOLS[0]["function"], sort_keys=True)
    assert render(dict(samples[2])) == (
        "<|im_start|>system\nYou plan trips.\n# Tools\n"
        f"{tool_json}\n<|im_end|>\n"
        "<|im_start|>user\nPlan a trip<|im_end|>\n"
        "<|im_start|>assistant\n"
        '<tool_call>{"name": "search", "arguments": {"q": "Paris"}}</tool_call><|im_end|>\n'
        "<|im_start|>tool\nParis is nice<|im_end|>\n"
        "<|im_start|>assistant\nGo to Paris<|im_end|>\n"
    )
    assert render(dict(samples[1])) == (
        "<|im_start|>user\nSummarize: Paris, Rome<|im_end|>\n<|im_start|>assistant\nParis is nice<|im_end|>\n"
    )


def test_images_stay_content_parts() -> None:
    b = TraceBuilder()
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    b.llm(0, 1, [{"role": "user", "content": [{"type": "text", "text": "Describe"}, image]}], "A chart.")
    (sample,) = TraceToMessages().adapt(b.spans())
    as_openai(dict(sample))
    assert sample["messages"][0]["content"][1] == image
    assert render(dict(sample)).startswith("<|im_start|>user\nDescribe<image><|im_end|>\n")


def test_agent_lightning_03_flattened_spans_with_tool_child_spans() -> None:
    b = TraceBuilder()
    attrs = {
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "Weather in Paris?",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.finish_reason": "tool_calls",
        "gen_ai.request.functions.0.name": "weather",
        "gen_ai.request.functions.0.description": "Get the weather",
        "gen_ai.request.functions.0.parameters": json.dumps({"type": "object", "properties": {}}),
        "gen_ai.response.id": "legacy",
    }
    tool = {
        "tool.name": "weather",
        "tool.parameters": '{"city": "Paris"}',
        "tool.call.id": "c9",
        "tool.call.type": "function",
    }
    with b.span("openai.chat.completion", 0, 5, **attrs), b.span("tool_call", 1, 2, **tool):
        pass
    (sample,) = TraceToMessages().adapt(b.spans())
    as_openai(dict(sample))
    assert sample["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Get the weather",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    assert sample["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c9",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
    ]


def test_a_call_recorded_by_tracer_and_proxy_appears_once_and_each_choice_is_a_sample() -> None:
    b = TraceBuilder()
    b.llm(0, 5, [user("hi")], "hello", response_id="same")
    b.root_span(
        "agl.llm_proxy.request",
        1,
        4,
        **b.llm_attributes([user("hi")], "hello", response_id="same", source="proxy"),
    )
    two = b.llm_attributes([user("pick")], "A", response_id="n2")
    two["gen_ai.output.messages"] = json.dumps(
        [
            {"role": "assistant", "parts": [{"type": "text", "content": c}], "finish_reason": "stop"}
            for c in "AB"
        ]
    )
    with b.span("chat qwen", 6, 7, **two):
        pass
    samples = TraceToMessages().adapt(b.spans())
    assert [s["messages"][-1]["content"] for s in samples] == ["hello", "A", "B"]


def test_malformed_message_json_names_the_span() -> None:
    b = TraceBuilder()
    attrs = b.llm_attributes([user("hi")], "x")
    attrs["gen_ai.input.messages"] = "[{not json"
    with b.span("chat qwen", 0, 1, **attrs) as span:
        span_id = format(span.get_span_context().span_id, "016x")
    with pytest.raises(
        ValueError,
        match=f"span 'chat qwen' \\({span_id}\\), attribute 'gen_ai.input.messages' is not valid JSON",
    ):
        TraceToMessages().adapt(b.spans())
    attrs["gen_ai.input.messages"] = json.dumps({"role": "user"})
    attrs["gen_ai.output.messages"] = json.dumps("just text")
    with b.span("chat qwen", 2, 3, **attrs):
        pass
    with pytest.raises(
        ValueError, match=r"'gen_ai\.output\.messages' must be a list of message objects, got str"
    ):
        TraceToMessages().adapt(b.spans()[1:])
