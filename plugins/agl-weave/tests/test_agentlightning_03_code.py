"""Agent Lightning 0.3 user code with one changed import: calc_x's ``--weave`` shape, offline.

0.3's calc_x example trains with ``Trainer(..., tracer=WeaveTracer())``; here the same shape runs with
``agentlightning`` replaced by ``agl_core``: a ``@agl.rollout`` agent calls an OpenAI-compatible model (a
local fake server), parses the answer in a ``@weave.op``, emits its reward, and two runner workers trace
it with WeaveTracer. The spans are read back from the trainer's in-memory store.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import openai
import pytest
import weave

import agl_core as agl
from agl_core.plugins import PluginManager
from agl_testing import use_plugin_manager
from agl_testing.fake_openai import FakeOpenAIServer, Reply


def scripted_model(request: dict[str, Any]) -> Reply:
    question = str(request["messages"][-1]["content"])
    a, b = (int(n) for n in re.findall(r"\d+", question)[:2])
    return Reply(content=f"The answer is ### {a + b if a % 3 else a + b + 1} ###")  # every third is wrong


@weave.op
def parse_answer(text: str) -> int | None:
    match = re.search(r"###\s*(-?\d+)\s*###", text)
    return int(match.group(1)) if match else None


@agl.rollout
def calc_agent(task: dict[str, Any], llm: agl.LLM) -> None:
    client = openai.OpenAI(base_url=llm.endpoint, api_key="dummy", max_retries=1)
    try:
        reply = client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": task["question"]}], temperature=0.0
        )
    finally:
        client.close()
    answer = parse_answer(reply.choices[0].message.content or "")
    agl.emit_reward(1.0 if answer == task["result"] else 0.0)


@pytest.fixture
def loaded_plugins() -> Any:
    manager = PluginManager(strict=True)
    manager.load_entrypoints()
    with use_plugin_manager(manager):
        yield manager


def test_calc_x_with_weave_tracer_trains_offline(loaded_plugins: PluginManager) -> None:
    from agl_core.tracer.weave import WeaveTracer  # 0.3: from agentlightning.tracer.weave import WeaveTracer

    agl.setup_logging("WARNING", color=False)
    tasks = [{"question": f"What is {i} + {i + 1}?", "result": 2 * i + 1} for i in range(1, 7)]
    with FakeOpenAIServer(scripted_model) as model:
        trainer = agl.Trainer(
            n_runners=2,
            strategy="shm",
            algorithm=agl.Baseline(n_epochs=1),
            tracer=WeaveTracer(),
            initial_resources={"main_llm": agl.LLM(endpoint=model.base_url, model="fake-calc-model")},
            progress=False,
        )
        trainer.fit(calc_agent, train_dataset=tasks[:4], val_dataset=tasks[4:])

    async def collect() -> list[tuple[agl.Rollout, list[agl.Span]]]:
        rollouts = await trainer.store.query_rollouts()
        return [(r, list(await trainer.store.query_spans(r.rollout_id, "latest"))) for r in rollouts]

    results = asyncio.run(collect())
    assert len(results) == 6
    rewards = []
    for rollout, spans in results:
        assert rollout.status == "succeeded", rollout
        named = {span.name: span for span in spans}
        # the agent's op, Weave's own OpenAI op, the reward, under one root call per rollout
        assert {"parse_answer", "openai.chat.completions.create", "agentlightning.annotation"} <= set(named)
        roots = [span for span in spans if span.parent_id is None]
        assert len(roots) == 1 and all(span.trace_id == roots[0].trace_id for span in spans)
        assert all(span.resource.attributes["agentlightning.tracer.name"] == "weave" for span in spans)
        parsed = named["parse_answer"]
        assert parsed.attributes["agentlightning.operation.input.text"].startswith("The answer is ###")
        llm_call = named["openai.chat.completions.create"]
        assert llm_call.attributes["agentlightning.operation.input.model"] == "fake-calc-model"
        rewards.append(agl.find_final_reward(spans))
    assert sorted(r for r in rewards if r is not None) == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
