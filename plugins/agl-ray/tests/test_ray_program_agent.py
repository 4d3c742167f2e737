"""A ProgramAgent on Ray actors, with no Ray-specific code: each attempt's program calls the model through
the proxy route it was given, and its calls, token ids, `agl.program` span and reward reach the store."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

import agl_core as agl
from agl_core.llm_proxy import LLMProxy
from agl_core.program import ProgramAgent
from agl_core.store.memory import InMemoryLightningStore
from agl_testing.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.usefixtures("local_ray")

# The program: the standard library only. One chat call to $OPENAI_BASE_URL, and the reward on its last line.
PROGRAM = """
import json, os, sys, urllib.request
body = {"model": os.environ["AGL_LLM_MODEL"], "messages": [{"role": "user", "content": sys.argv[1]}]}
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions", json.dumps(body).encode(),
    {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
answer = json.load(urllib.request.urlopen(request, timeout=30))["choices"][0]["message"]["content"]
print(json.dumps({"reward": 1.0 if answer == sys.argv[1] else 0.0}))
"""


def test_program_agent_runs_on_ray_actors() -> None:
    store = InMemoryLightningStore()
    agent = ProgramAgent([sys.executable, "-c", PROGRAM, "{input.question}"], timeout=60)
    strategy = {"type": "ray", "n_runners": 2, "runner_resources": {"CPU": 0.25}, "server_host": "127.0.0.1"}
    with (
        FakeOpenAIServer(token_ids="always") as backend,
        LLMProxy({"policy": backend.base_url}, store=store) as proxy,
    ):
        trainer = agl.Trainer(
            strategy=strategy, store=store, initial_resources={"llm": proxy.as_resource()}, progress=False
        )
        trainer.dev(agent, [{"question": f"question {n}"} for n in range(6)])

    async def read() -> list[tuple[Any, list[Any]]]:
        return [
            (r, list(await store.query_spans(r.rollout_id, "latest"))) for r in await store.query_rollouts()
        ]

    rollouts = asyncio.run(read())
    assert len(rollouts) == 6
    assert {r.attempt.worker_id for r, _ in rollouts} <= {"Worker-0", "Worker-1"}  # type: ignore[union-attr]
    for rollout, spans in rollouts:
        assert rollout.status == "succeeded"
        calls = [s for s in spans if s.name == "agl.llm_proxy.request"]
        assert len(calls) == 1 and calls[0].attributes["response_token_ids"]
        assert [s.name for s in spans].count("agl.program") == 1
        assert agl.find_final_reward(spans) == 1.0
