"""A small SQLite store with chat LLM spans and rewards, built through the store API (no training run)."""

from __future__ import annotations

import json
from pathlib import Path

from agl_core.store import open_store
from agl_testing.store_conformance import make_span


async def small_store(path: Path, n: int = 6) -> list[str]:
    """``n`` rollouts, each with one LLM call span (GenAI messages, token ids) and a reward ``i / n``.

    Rollout ``i`` has reward ``i / n``; the last one stays running (no reward). Returns the ids in order.
    """
    store = open_store(f"sqlite:///{path}")
    ids: list[str] = []
    try:
        for i in range(n):
            started = await store.start_rollout({"question": f"q{i}"}, mode="train")
            rid, aid = started.rollout_id, started.attempt.attempt_id
            ids.append(rid)
            messages_in = [{"role": "user", "parts": [{"type": "text", "content": f"question {i}"}]}]
            messages_out = [{"role": "assistant", "parts": [{"type": "text", "content": f"answer {i}"}]}]
            spans = [
                make_span(
                    rid,
                    aid,
                    1,
                    name="chat model",
                    start_time=1000.0 + i,
                    attributes={
                        "gen_ai.input.messages": json.dumps(messages_in),
                        "gen_ai.output.messages": json.dumps(messages_out),
                        "prompt_token_ids": [1, 2, i],
                        "response_token_ids": [3, i],
                    },
                )
            ]
            if i < n - 1:
                spans.append(
                    make_span(
                        rid,
                        aid,
                        2,
                        name="agentlightning.annotation",
                        start_time=1000.5 + i,
                        attributes={
                            "agentlightning.reward.0.name": "primary",
                            "agentlightning.reward.0.value": i / n,
                        },
                    )
                )
            await store.add_many_spans(spans)
            if i < n - 1:
                await store.update_attempt(rid, aid, status="succeeded")
    finally:
        await store.close()
    return ids
