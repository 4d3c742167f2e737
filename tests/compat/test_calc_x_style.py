"""A 0.3 ``calc_x``-shaped training script: ``LitAgent`` subclass, named resources, hooks, ``Baseline``.

Written as 0.3 user code with only the import changed; the model is a local fake OpenAI server.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import openai

import agl_core as agl
from agl_testing.fake_openai import FakeOpenAIServer, Reply


def scripted_model(request: dict[str, Any]) -> Reply:
    question = str(request["messages"][-1]["content"])
    a, b = (int(n) for n in re.findall(r"\d+", question)[:2])
    # a wrong answer for every third question, so the rewards are not all 1
    return Reply(content=f"### {a + b if a % 3 else a + b + 1} ###")


class CalcAgent(agl.LitAgent[dict[str, Any]]):
    """0.3's calc_x shape: read the LLM from the named resources, call it, score the answer."""

    def rollout(self, task: dict[str, Any], resources: agl.NamedResources, rollout: agl.Rollout) -> float:
        llm = resources["main_llm"]
        assert isinstance(llm, agl.LLM)
        client = openai.OpenAI(base_url=llm.endpoint, api_key="dummy", max_retries=1)
        try:
            reply = client.chat.completions.create(
                model=llm.model, messages=[{"role": "user", "content": task["question"]}], temperature=0.0
            )
        finally:
            client.close()
        match = re.search(r"###\s*(-?\d+)\s*###", reply.choices[0].message.content or "")
        return 1.0 if match and int(match.group(1)) == task["result"] else 0.0


class CountingHook(agl.Hook):
    def __init__(self) -> None:
        super().__init__()
        self.traces: list[str] = []
        self.ended: dict[str, int] = {}

    async def on_trace_start(self, *, agent: Any, runner: Any, tracer: Any, rollout: agl.Rollout) -> None:
        self.traces.append(rollout.rollout_id)

    async def on_rollout_end(self, *, agent: Any, runner: Any, rollout: agl.Rollout, spans: Any) -> None:
        self.ended[rollout.rollout_id] = len(spans)


def test_calc_x_shaped_script_trains_offline() -> None:
    agl.setup_logging("WARNING", color=False)
    tasks = [{"question": f"What is {i} + {i + 1}?", "result": 2 * i + 1} for i in range(1, 7)]
    hook = CountingHook()
    with FakeOpenAIServer(scripted_model, token_ids="always") as model:
        trainer = agl.Trainer(
            n_runners=2,
            strategy="shm",
            algorithm=agl.Baseline(n_epochs=1),
            initial_resources={"main_llm": agl.LLM(endpoint=model.base_url, model="fake-calc-model")},
            hooks=[hook],
        )
        trainer.fit(CalcAgent(), train_dataset=tasks[:4], val_dataset=tasks[4:])

    async def collect() -> tuple[list[float | None], list[agl.Triplet]]:
        rewards, triplets = [], []
        for rollout in await trainer.store.query_rollouts():
            spans = list(await trainer.store.query_spans(rollout.rollout_id, "latest"))
            rewards.append(agl.find_final_reward(spans))
            triplets.extend(trainer.adapter(spans))
        return rewards, triplets

    rewards, triplets = asyncio.run(collect())
    assert sorted(r for r in rewards if r is not None) == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    assert len(triplets) == 6 and all(t.response["token_ids"] for t in triplets)
    assert len(hook.traces) == 6 and len(hook.ended) == 6 and all(n > 0 for n in hook.ended.values())
