"""A program agent's rollouts, as the dashboard reads them from `agl store serve`: the doctor verdict, the
spans (the proxy's calls, the reward, the `agl.program` run) and, for a failed run, what the Failures panel
lists -- the same routes and fields a Python agent's rollout gives."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from agl_core.program import ProgramAgent
from agl_core.store.http.server import LightningStoreServer
from agl_testing.fake_openai import FakeOpenAIServer
from tests.program.test_program_agent import PROGRAM, train


@pytest.fixture(scope="module")
def backend() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(token_ids="always") as server:
        yield server


async def get(url: str) -> Any:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        assert response.status == 200, await response.text()
        return json.loads(await response.read())


def test_the_dashboard_routes_show_a_program_rollout_like_a_python_one(backend: FakeOpenAIServer) -> None:
    ok = ProgramAgent([sys.executable, PROGRAM, "{input.question}"])
    failing = ProgramAgent([sys.executable, PROGRAM, "{input.question}", "--exit", "4"])
    stores = [
        train(ok, backend, [{"question": "hi"}], n_runners=1),
        train(failing, backend, [{"question": "no"}], n_runners=1),
    ]

    async def read(store: Any) -> tuple[Any, Any, Any]:
        server = LightningStoreServer(store, port=0)
        await server.start()
        try:
            base = server.endpoint + "/v1/agl"
            (rollout,) = (await get(base + "/rollouts"))["items"]
            rid = rollout["rollout_id"]
            attempts = (await get(f"{base}/rollouts/{rid}/attempts?limit=-1"))["items"]
            spans = (
                await get(f"{base}/spans?rollout_id={rid}&attempt_id={attempts[-1]['attempt_id']}&limit=-1")
            )["items"]
            doctor = await get(f"{base}/rollouts/{rid}/doctor")
            return rollout, spans, doctor
        finally:
            await server.stop()

    (good, good_spans, good_doctor), (bad, bad_spans, bad_doctor) = [asyncio.run(read(s)) for s in stores]

    assert good["status"] == "succeeded"
    names = sorted(s["name"] for s in good_spans)
    assert names == ["agentlightning.annotation", "agl.llm_proxy.request", "agl.program"]
    assert good_doctor["report"]["triplets"] and not [
        p for p in good_doctor["report"]["problems"] if p["severity"] == "error"
    ]

    assert bad["status"] == "failed"
    program = next(s for s in bad_spans if s["name"] == "agl.program")
    assert (
        program["status"]["status_code"] == "ERROR"
        and program["status"]["description"] == "exited with code 4"
    )
    assert program["attributes"]["agl.program.stderr_tail"] == "thinking done\n"
    exception = next(s for s in bad_spans if s["name"] == "agentlightning.exception")
    assert "exited with code 4" in exception["attributes"]["exception.message"]
    assert bad_doctor["status"] == "failed" and bad_doctor["attempts"][-1]["status"] == "failed"
