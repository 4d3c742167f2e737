"""The store benchmark's workload data, shared by `store_bench.py` (agl) and `peer_store_bench.py`.

It imports neither agl nor Agent Lightning, so each benchmark builds the same spans with its own
``Span`` class and both measure exactly the same work.
"""

from __future__ import annotations

from typing import Any

OPERATION_COUNTS: dict[str, int] = {
    "enqueue_rollout": 10_000,
    "dequeue_rollout": 10_000,
    "add_span": 100_000,
    "add_many_spans": 100_000,
    "update_attempt": 10_000,
}
"""How many times each operation runs at ``--scale 1`` (spans for the span operations)."""

SPAN_TEMPLATE_FIELDS: dict[str, Any] = {
    "attributes": {
        "gen_ai.system": "openai",
        "gen_ai.request.model": "bench-model",
        "gen_ai.usage.prompt_tokens": 42,
        "gen_ai.usage.completion_tokens": 7,
        "agentlightning.operation": "chat",
    },
    "name": "openai.chat.completion",
    "trace_id": "5" * 32,
    "span_id": "1" * 16,
    "start_time": 1_700_000_000.0,
    "end_time": 1_700_000_001.0,
}
"""Keyword arguments of ``Span.from_attributes`` for the template span (an LLM call)."""


def spans_from_template(template: Any, targets: list[tuple[str, str]], per_target: int) -> list[Any]:
    """`per_target` copies of `template` per ``(rollout_id, attempt_id)``, sequence ids 1.. per rollout."""
    spans = []
    for rollout_id, attempt_id in targets:
        for seq in range(1, per_target + 1):
            spans.append(
                template.model_copy(
                    update={
                        "rollout_id": rollout_id,
                        "attempt_id": attempt_id,
                        "sequence_id": seq,
                        "span_id": f"{seq:016x}",
                    }
                )
            )
    return spans


async def start_many(store: Any, count: int, worker: str | None = None) -> list[tuple[str, str]]:
    """Start `count` rollouts (attempt #1 each, for `worker`); their ``(rollout_id, attempt_id)``."""
    started = []
    for _ in range(count):
        attempted = await store.start_rollout({"task": "bench"}, worker_id=worker)
        started.append((attempted.rollout_id, attempted.attempt.attempt_id))
    return started
