"""`agl runner --program` against a served store, and `agl reward` posting to the store over HTTP."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agl_core.emitter import find_final_reward
from agl_core.llm_proxy import LLMProxy
from agl_core.store.http.server import LightningStoreServer
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import PromptTemplate
from agl_testing.fake_openai import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[2]
PROGRAM = str(Path(__file__).with_name("chat_program.py"))


@pytest.fixture(scope="module")
def backend() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(token_ids="always") as server:
        yield server


@pytest.fixture
async def served() -> AsyncIterator[tuple[InMemoryLightningStore, str]]:
    store = InMemoryLightningStore()
    server = LightningStoreServer(store, port=0)
    await server.start()
    try:
        yield store, server.endpoint
    finally:
        await server.stop()


async def agl(*args: str, timeout: float = 120) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agl_core.cli", *args, cwd=REPO, stderr=asyncio.subprocess.PIPE
    )
    try:
        _, err = await asyncio.wait_for(process.communicate(), timeout)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, err.decode()


async def test_agl_runner_program_takes_rollouts_from_the_store(
    backend: FakeOpenAIServer, served: tuple[InMemoryLightningStore, str]
) -> None:
    store, url = served
    async with LLMProxy({"policy": backend.base_url}, store=store) as proxy:
        await store.add_resources(
            {"llm": proxy.as_resource(), "prompt": PromptTemplate(template="Hi", engine="f-string")}
        )
        questions = ["what is 1 plus 1", "what is 2 plus 2"]
        for question in questions:
            await store.enqueue_rollout({"question": question}, mode="train")
        code, err = await agl(
            "runner",
            "--store",
            url,
            "--program",
            f"{sys.executable} {PROGRAM} {{input.question}} --reward-file",
            "--env-map",
            "SYSTEM_PROMPT=resources.prompt.template",
            "--max-rollouts",
            "2",
            "--poll-interval",
            "0.05",
            "--worker-id",
            "7",
        )
        assert code == 0, err
        assert await proxy.flush(timeout=10)
    rollouts = await store.query_rollouts()
    assert {r.status for r in rollouts} == {"succeeded"}
    for rollout in rollouts:
        spans = await store.query_spans(rollout.rollout_id, "latest")
        assert [s.name for s in spans].count("agl.llm_proxy.request") == 1
        assert find_final_reward(spans) == 1.0


async def test_agl_runner_program_options_need_program() -> None:
    code, err = await agl(
        "runner", "--store", "http://127.0.0.1:9", "--agent", "x:y", "--env-map", "A=input.a"
    )
    assert code == 2 and "need --program" in err
    code, err = await agl("runner", "--store", "http://127.0.0.1:9")
    assert code == 2 and "--program" in err
    code, err = await agl("runner", "--store", "http://127.0.0.1:9", "--program", "x", "--env-map", "oops")
    assert code == 2 and "NAME=PATH" in err


async def test_agl_reward_posts_a_reward_span_to_a_served_store(
    served: tuple[InMemoryLightningStore, str],
) -> None:
    store, url = served
    rollout = await store.start_rollout({"question": "long-running"})
    code, err = await agl(
        "reward",
        "0.75",
        "--store",
        url,
        "--rollout-id",
        rollout.rollout_id,
        "--attempt-id",
        rollout.attempt.attempt_id,
    )
    assert code == 0, err
    assert find_final_reward(await store.query_spans(rollout.rollout_id, "latest")) == 0.75
    code, err = await agl("reward", "0.5")
    assert code == 2 and "AGL_REWARD_FILE" in err
