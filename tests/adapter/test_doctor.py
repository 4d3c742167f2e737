"""``agl doctor``: real agents (openai client → fake server, traced by OtelTracer) into a SQLite store,
then the command's output, as a user reads it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

import aiohttp
import openai
import pytest
from click.testing import CliRunner

from agl_core.adapter.doctor import diagnose_rollout
from agl_core.cli.doctor_cmd import doctor_command
from agl_core.emitter import emit_reward
from agl_core.store import open_store
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer.otel import OtelTracer
from agl_testing.fake_openai import FakeOpenAIServer

Agent = Callable[[Any, openai.AsyncOpenAI, FakeOpenAIServer], Awaitable[None]]


async def _record(uri: str, agent: Agent, token_ids: Literal["always", "never"]) -> tuple[str, str]:
    store = open_store(uri)
    tracer = OtelTracer(flush_timeout=10.0)
    tracer.init_worker(0, store)
    try:
        async with FakeOpenAIServer(token_ids=token_ids) as server:
            client = openai.AsyncOpenAI(api_key="test", base_url=server.base_url, max_retries=0)
            rollout = await store.start_rollout({"task": "plan a trip"})
            rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
            async with tracer.trace_context(rollout_id=rid, attempt_id=aid) as otel:
                await agent(otel, client, server)
            await client.close()
        await store.update_attempt(rid, aid, status="succeeded")
        reward_ids = [s.span_id for s in await store.query_spans(rid, name="agentlightning.annotation")]
    finally:
        tracer.teardown_worker(0)
        await store.close()
    return rid, ",".join(reward_ids)


def record(
    tmp_path: Path, agent: Agent, token_ids: Literal["always", "never"] = "always"
) -> tuple[str, str, str]:
    """Run ``agent`` as one traced rollout; returns (store URI, rollout id, reward span ids)."""
    uri = f"sqlite:///{tmp_path / 'agl.db'}"
    rid, rewards = asyncio.run(_record(uri, agent, token_ids))
    return uri, rid, rewards


def doctor(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(doctor_command, list(args))
    return result.exit_code, result.output


async def ask(client: openai.AsyncOpenAI, text: str) -> None:
    await client.chat.completions.create(model="policy", messages=[{"role": "user", "content": text}])


async def two_agents(otel: Any, client: openai.AsyncOpenAI, server: FakeOpenAIServer) -> None:
    for agent in ("writer", "reviewer"):
        with otel.start_as_current_span(f"invoke_agent {agent}", attributes={"gen_ai.agent.name": agent}):
            await ask(client, f"{agent}: do your part")
    emit_reward(1.0)


def test_healthy_rollout_exits_0_with_a_table_of_triplets(tmp_path: Path) -> None:
    uri, rid, _ = record(tmp_path, two_agents)
    code, out = doctor(rid, "--store", uri)
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == f"Rollout {rid}: succeeded, 1 attempt(s)"
    assert "Agents seen: writer, reviewer" in lines
    assert "LLM calls: 2 -> triplets: 2" in lines
    rows = [line.split() for line in lines if line.startswith(("  0 ", "  1 "))]
    assert [(r[1], r[4]) for r in rows] == [("writer", "-"), ("reviewer", "1")]
    assert all(int(r[2]) > 0 and int(r[3]) > 0 for r in rows)  # token ids on both sides
    assert lines[-1] == "Verdict: OK (triplets: 2, with a reward: 1)"
    code, out = doctor(rid, "--store", uri, "--agent-match", "^writer$")
    assert code == 0 and "LLM calls: 2 -> triplets: 1" in out
    assert "[info] agent_match_excluded_some: 1 of 2 LLM calls are outside agents matching" in out


def test_no_llm_span_when_the_model_is_called_outside_the_openai_client(tmp_path: Path) -> None:
    async def structured_output(otel: Any, client: openai.AsyncOpenAI, server: FakeOpenAIServer) -> None:
        with otel.start_as_current_span("ChatOpenAI.with_structured_output"):
            body = {"model": "policy", "messages": [{"role": "user", "content": "extract"}]}
            async with (
                aiohttp.ClientSession() as http,
                http.post(server.base_url + "/chat/completions", json=body),
            ):
                pass
        emit_reward(1.0)

    uri, rid, _ = record(tmp_path, structured_output)
    code, out = doctor(rid, "--store", uri)
    assert code == 1
    assert (
        "  [error] no_llm_spans: No LLM-call span among the 2 spans of this rollout (span names seen: "
        "'ChatOpenAI.with_structured_output', 'agentlightning.annotation'). "
        "'ChatOpenAI.with_structured_output' look like LLM calls but match neither the adapter's "
        "llm_call_match nor a known LLM-span shape (attribute keys of 'ChatOpenAI.with_structured_output': "
        "none).\n"
    ) in out
    assert "      fix: If 'ChatOpenAI.with_structured_output' records the model's token ids, pass" in out
    assert out.rstrip().endswith("Verdict: NO USABLE TRAINING DATA - fix the errors above.")


def test_llm_spans_without_token_ids(tmp_path: Path) -> None:
    uri, rid, _ = record(tmp_path, two_agents, token_ids="never")
    code, out = doctor(rid, "--store", uri)
    assert code == 1
    assert (
        "  [error] missing_token_ids: 2 of 2 LLM calls have no prompt and response token ids, so they "
        "cannot be used for RL training.\n"
        '      fix: Ask the model server for them with `extra_body={"return_token_ids": True}` '
        "(vLLM >= 0.10.2), or route the agent's calls through the agl LLM proxy, which records them.\n"
    ) in out


def test_no_reward(tmp_path: Path) -> None:
    async def no_reward(otel: Any, client: openai.AsyncOpenAI, server: FakeOpenAIServer) -> None:
        await ask(client, "hello")

    uri, rid, _ = record(tmp_path, no_reward)
    code, out = doctor(rid, "--store", uri)
    assert code == 1
    assert (
        "  [error] no_reward: No reward span in this rollout, so every triplet has reward None.\n"
        "      fix: Call agl.emit_reward(value) in the agent after the LLM calls it scores, or return a "
        "float from the rollout function.\n"
    ) in out


def test_reward_not_attributable(tmp_path: Path) -> None:
    async def early_reward(otel: Any, client: openai.AsyncOpenAI, server: FakeOpenAIServer) -> None:
        emit_reward(0.5)
        await ask(client, "too late")

    uri, rid, reward_id = record(tmp_path, early_reward)
    code, out = doctor(rid, "--store", uri)
    assert code == 1
    assert (
        f"  [error] reward_unattributed: Reward 0.5 (span {reward_id}) is not attributed to any LLM call: "
        "it was emitted before the first LLM call ended.\n"
        "      fix: Emit the reward after the LLM call it scores has returned.\n"
    ) in out


def test_json_output_and_attempt_selection(tmp_path: Path) -> None:
    uri, rid, _ = record(tmp_path, two_agents, token_ids="never")
    code, out = doctor(rid, "--store", uri, "--json", "--attempt", "all")
    assert code == 1
    data = json.loads(out)
    assert data["rollout_id"] == rid and data["scope"] == "all 1 attempt(s)"
    assert data["report"]["ok"] is False
    assert [p["code"] for p in data["report"]["problems"]] == ["missing_token_ids"]
    attempt_id = data["attempts"][0]["attempt_id"]
    code, out = doctor(rid, "--store", uri, "--attempt", attempt_id)
    assert code == 1 and f"Analysed: attempt {attempt_id}" in out


def test_unusable_inputs_exit_3_with_the_reason(tmp_path: Path) -> None:
    uri, rid, _ = record(tmp_path, two_agents)
    code, out = doctor("ro-nope", "--store", uri)
    assert code == 3
    assert "agl: error: Rollout 'ro-nope' is not in this store; check the id and the --store URI." in out
    code, out = doctor(rid, "--store", uri, "--attempt", "at-nope")
    assert code == 3 and f"Rollout {rid!r} has no attempt 'at-nope' (attempts: at-" in out
    code, out = doctor(rid, "--store", "no-scheme")
    assert code == 3 and "has no scheme" in out
    code, out = doctor(rid, "--store", uri, "--adapter", "nonsense")
    assert code == 3 and "nonsense" in out


def test_proxy_adapter_on_a_tracer_only_rollout(tmp_path: Path) -> None:
    uri, rid, _ = record(tmp_path, two_agents)
    code, out = doctor(rid, "--store", uri, "--adapter", "proxy-triplet")
    assert code == 1
    assert (
        "  [error] no_proxy_spans: No call recorded by the LLM proxy in this rollout, but the tracer "
        "recorded 2 LLM calls.\n"
    ) in out


async def test_report_function_on_an_in_memory_store() -> None:
    store = InMemoryLightningStore()
    rollout = await store.start_rollout({"task": 1})
    report = await diagnose_rollout(store, rollout.rollout_id)
    assert report.status == "preparing" and report.scope == f"latest attempt ({rollout.attempt.attempt_id})"
    assert report.report.codes() == ["no_spans"]
    with pytest.raises(ValueError, match="Unknown adapter 'x'"):
        await diagnose_rollout(store, rollout.rollout_id, adapter="x")
    await store.close()


def test_llm_span_of_an_unknown_shape_is_kept_and_its_keys_named(tmp_path: Path) -> None:
    async def vendor_agent(otel: Any, client: openai.AsyncOpenAI, server: FakeOpenAIServer) -> None:
        attributes = {"openinference.span.kind": "LLM", "vendor.request_blob": "...", "vendor.reply.0": "x"}
        with otel.start_as_current_span("VendorLLM", attributes=attributes):
            pass
        await ask(client, "a readable call")
        emit_reward(1.0)

    uri, rid, _ = record(tmp_path, vendor_agent)
    _, out = doctor(rid, "--store", uri)
    assert "LLM calls: 2 -> triplets: 2" in out  # the unreadable span is kept, not dropped
    assert "[warning] unreadable_llm_spans: 1 LLM-call spans carry no prompt or completion" in out
    assert "openinference.span.kind, vendor.request_blob, vendor.reply.N" in out
