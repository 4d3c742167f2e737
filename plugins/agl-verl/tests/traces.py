"""Realistic proxy-style traces and a scripted stand-in for runners, written straight into a store."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agl_core.emitter import emit_reward
from agl_core.store import LightningStore
from agl_core.types import Span

SYSTEM = [1, 50, 51, 52, 2]  # <|im_start|>system ...<|im_end|>
TOOL_GLUE = [2, 1, 70, 71]  # <|im_end|> <|im_start|> tool ...


@dataclass
class Call:
    """One LLM call as the proxy records it."""

    prompt: list[int]
    response: list[int]
    agent: str | None = "solver"


@dataclass
class Script:
    """What a fake runner does with one rollout: record calls and a reward, then finish with a status."""

    calls: list[Call] = field(default_factory=list)
    reward: float | None = None
    status: str = "succeeded"  # or "failed", or "hang" (never finishes)


def multi_turn(question: list[int], answers: Sequence[list[int]], tool: Sequence[list[int]]) -> list[Call]:
    """Calls of an agent that answers, gets a tool result, answers again: each prompt extends the last."""
    context = SYSTEM + question
    calls = []
    for i, answer in enumerate(answers):
        calls.append(Call(list(context), list(answer)))
        if i < len(tool):
            context = context + answer + TOOL_GLUE + tool[i]
    return calls


_ids = itertools.count()


def call_spans(rollout_id: str, attempt_id: str, script: Script, start_seq: int = 1) -> list[Span]:
    """Proxy request spans (+ tracer agent/LLM spans when the call names an agent) and the reward span."""
    spans: list[Span] = []
    seq = itertools.count(start_seq)
    for call in script.calls:
        response_id = f"chatcmpl-{next(_ids)}"
        spans.append(
            Span.from_attributes(
                rollout_id=rollout_id,
                attempt_id=attempt_id,
                sequence_id=next(seq),
                name="agl.llm_proxy.request",
                attributes={
                    "prompt_token_ids": call.prompt,
                    "response_token_ids": call.response,
                    "gen_ai.response.id": response_id,
                },
            )
        )
        if call.agent is not None:
            agent = Span.from_attributes(
                rollout_id=rollout_id,
                attempt_id=attempt_id,
                sequence_id=next(seq),
                name=f"agent {call.agent}",
                attributes={"gen_ai.agent.name": call.agent},
            )
            spans.append(agent)
            spans.append(
                Span.from_attributes(
                    rollout_id=rollout_id,
                    attempt_id=attempt_id,
                    sequence_id=next(seq),
                    name="chat tiny-model",
                    trace_id=agent.trace_id,
                    parent_id=agent.span_id,
                    attributes={"gen_ai.response.id": response_id},
                )
            )
    if script.reward is not None:
        core = emit_reward(script.reward, propagate=False)
        spans.append(
            Span.from_core_fields(core, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=next(seq))
        )
    return spans


async def run_scripted(store: LightningStore, script_for: Callable[[Any, int], Script]) -> int:
    """Dequeue every queued rollout and play its script; returns how many were dequeued.

    ``script_for(task_input, copy_index)`` picks the behaviour; copy_index counts the rollouts already
    seen for the same task.
    """
    seen: dict[str, int] = {}
    count = 0
    while (attempted := await store.dequeue_rollout(worker_id="fake-runner")) is not None:
        count += 1
        key = repr(attempted.input)
        index = seen.get(key, 0)
        seen[key] = index + 1
        script = script_for(attempted.input, index)
        rid, aid = attempted.rollout_id, attempted.attempt.attempt_id
        await store.update_attempt(rid, aid, status="running")
        spans = call_spans(rid, aid, script)
        if spans:
            await store.add_many_spans(spans)
        if script.status != "hang":
            await store.update_attempt(rid, aid, status=script.status)  # type: ignore[arg-type]
    return count
