"""Agent Lightning 0.3's message helpers of ``agentlightning.adapter.messages``.

Served at `agl_core.adapter.messages` (through `agl_core.adapter.messages_03`). agl's
`TraceToMessages` reads spans directly; these two functions serve 0.3 code that worked on the flattened
attributes and the per-span records (prompt, completion, request, response, tools) 0.3 built from them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from agl_core.adapter.messages import OpenAIMessages

__all__ = ["convert_to_openai_messages", "group_genai_dict"]


def group_genai_dict(data: Mapping[str, Any], prefix: str) -> dict[str, Any] | list[Any]:
    """Nest the dotted keys below ``prefix`` (``gen_ai.prompt.0.role`` -> ``[{"role": ...}]``).

    A level whose keys are numbers becomes a list ordered by number (gaps closed, other keys dropped);
    any other level becomes a dict. Keys not below ``prefix`` are ignored.
    """
    below = {key[len(prefix) + 1 :]: value for key, value in data.items() if key.startswith(prefix + ".")}
    if any(key.split(".", 1)[0].isdigit() for key in below):
        groups: dict[int, dict[str, Any]] = {}
        for key, value in below.items():
            head, _, rest = key.partition(".")
            if head.isdigit():
                groups.setdefault(int(head), {})[f"{prefix}.{rest}"] = value
        return [group_genai_dict(groups[index], prefix) for index in sorted(groups)]
    result: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for key, value in below.items():
        head, dot, _ = key.partition(".")
        if dot:
            nested.setdefault(head, {})[f"{prefix}.{key}"] = value
        else:
            result[key] = value
    for head, group in nested.items():
        result[head] = group_genai_dict(group, f"{prefix}.{head}")
    return result


def _prompt_message(message: Mapping[str, Any]) -> dict[str, Any]:
    role = message["role"]
    if role == "assistant" and "tool_calls" in message:
        calls = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            for call in message["tool_calls"]
        ]
        return {"role": "assistant", "content": None, "tool_calls": calls}
    converted: dict[str, Any] = {"role": role, "content": message.get("content", "")}
    if message.get("tool_call_id") is not None:
        converted["tool_call_id"] = message["tool_call_id"]
    return converted


def _tool_definition(function: Mapping[str, Any]) -> dict[str, Any]:
    parameters = function["parameters"]
    return {
        "type": "function",
        "function": {
            "name": function["name"],
            "description": function.get("description", ""),
            "parameters": json.loads(parameters) if isinstance(parameters, str) else parameters,
        },
    }


def convert_to_openai_messages(
    prompt_completion_list: Iterable[Mapping[str, Any]],
) -> Iterator[OpenAIMessages]:
    """One OpenAI fine-tuning sample (``messages`` and ``tools``) per 0.3 span record.

    A record holds ``prompt`` (messages), ``completion`` (assistant outputs), ``request`` (its
    ``functions`` become the tool definitions) and ``tools`` (calls made after the completion, attached
    to each assistant output as ``tool_calls``).
    """
    for record in prompt_completion_list:
        messages = [_prompt_message(message) for message in record["prompt"]]
        calls = [
            {
                "id": tool["call"]["id"],
                "type": tool["call"]["type"],
                "function": {"name": tool["name"], "arguments": tool["parameters"]},
            }
            for tool in record.get("tools") or ()
        ]
        for completion in record["completion"]:
            if completion.get("role") == "assistant":
                reply: dict[str, Any] = {"role": "assistant", "content": completion.get("content")}
                if calls:
                    reply["tool_calls"] = calls
                messages.append(reply)
        functions = record.get("request", {}).get("functions")
        tools = None if functions is None else [_tool_definition(function) for function in functions]
        yield OpenAIMessages(messages=messages, tools=tools)
