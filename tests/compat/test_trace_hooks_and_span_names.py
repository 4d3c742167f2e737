"""Two 0.3 habits on real traces: reading ``tracer.get_last_trace()`` in ``on_trace_end``, and selecting
LLM calls by 0.3's span name ``openai.chat.completion`` (agl's instrumentation names them ``chat <model>``).

Written as a 0.3 script with only the import changed; the model is a local fake OpenAI server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import openai

import agl_core as agl
from agl_testing.fake_openai import FakeOpenAIServer


class AskAgent(agl.LitAgent[dict[str, Any]]):
    def rollout(self, task: dict[str, Any], resources: agl.NamedResources, rollout: agl.Rollout) -> float:
        llm = resources["main_llm"]
        assert isinstance(llm, agl.LLM)
        client = openai.OpenAI(base_url=llm.endpoint, api_key="dummy", max_retries=1)
        try:
            client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": task["q"]}])
        finally:
            client.close()
        return 1.0


class LastTraceAtEnd(agl.Hook):
    """0.3's pattern: inspect the finished trace in ``on_trace_end``."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, list[agl.Span]] = {}

    async def on_trace_end(self, *, agent: Any, runner: Any, tracer: Any, rollout: agl.Rollout) -> None:
        self.seen[rollout.rollout_id] = list(tracer.get_last_trace())


def test_last_trace_in_on_trace_end_and_llm_spans_by_03_name() -> None:
    hook = LastTraceAtEnd()
    with FakeOpenAIServer(["ok", "ok"], token_ids="always") as model:
        trainer = agl.Trainer(
            n_runners=1,
            strategy="shm",
            algorithm=agl.Baseline(n_epochs=1),
            initial_resources={"main_llm": agl.LLM(endpoint=model.base_url, model="fake-model")},
            hooks=[hook],
        )
        trainer.fit(AskAgent(), train_dataset=[{"q": "first"}, {"q": "second"}])

    # Every rollout, the first included, sees its own spans (0.3: [] first, then the previous rollout's).
    assert len(hook.seen) == 2
    for rollout_id, spans in hook.seen.items():
        assert spans and {s.rollout_id for s in spans} == {rollout_id}
        assert any(s.name == "chat fake-model" for s in spans)

    async def triplets_by_03_name() -> list[list[agl.Triplet]]:
        adapter = agl.TracerTraceToTriplet(llm_call_match=r"openai\.chat\.completion")
        found = []
        for rollout_id in hook.seen:
            found.append(adapter.adapt(list(await trainer.store.query_spans(rollout_id, "latest"))))
        return found

    per_rollout = asyncio.run(triplets_by_03_name())
    assert [len(triplets) for triplets in per_rollout] == [1, 1]
    assert all(t[0].response["token_ids"] for t in per_rollout)
