"""Drive an example agent with ``Trainer.dev()`` on one capture path and check what agl recorded.

``run_agent`` runs the agent's ``@agl.rollout`` entry over a few tasks against the fake model, either
directly (the tracer path: the agent's framework emits OpenTelemetry spans that agl's tracer collects) or
through an agl ``LLMProxy`` whose per-rollout route the agent is given (the proxy path: one
``agl.llm_proxy.request`` span per call, with the backend's token ids). ``check_run`` asserts what every
framework test asserts.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Literal

from math_tasks import MathTask, make_tasks

import agl_core as agl
from agl_core.adapter import LlmProxyTraceToTriplet, TracerTraceToTriplet, TraceToMessages
from agl_core.adapter.doctor import DoctorReport, diagnose_rollout
from agl_core.llm_proxy import LLMProxy
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import Rollout, Span, Triplet
from agl_testing.fake_openai import FakeOpenAIServer

MODEL = "fake-model"
CapturePath = Literal["tracer", "proxy"]


@dataclass
class RolloutRecord:
    """One rollout and what the adapters and ``agl doctor`` made of its spans."""

    rollout: Rollout
    spans: list[Span]
    triplets: list[Triplet]
    samples: list[Any]
    doctor: DoctorReport


@dataclass
class AgentRun:
    """The tasks, the model requests the fake server received, and one record per rollout."""

    path: CapturePath
    tasks: list[MathTask]
    model_calls: int
    records: list[RolloutRecord] = field(default_factory=list)


def run_agent(
    agent: agl.LitAgent[Any], fake: FakeOpenAIServer, path: CapturePath, *, n_tasks: int = 2
) -> AgentRun:
    """Run ``agent`` on ``n_tasks`` tasks with ``Trainer.dev()`` (one runner thread, in-memory store)."""
    tasks = make_tasks(n_tasks)
    store = InMemoryLightningStore()
    proxy: LLMProxy | None = None
    if path == "proxy":
        proxy = LLMProxy({MODEL: fake.base_url}, store=store).start_in_thread()
        llm: agl.LLM = proxy.as_resource()
        # the proxy records the model calls; the tracer still records the reward (and the agent's own spans)
        tracer = agl.OtelTracer(instrument_llm_clients=False)
    else:
        llm = agl.LLM(endpoint=fake.base_url, model=MODEL)
        tracer = agl.OtelTracer()
    trainer = agl.Trainer(
        n_runners=1,
        strategy="shm",
        store=store,
        tracer=tracer,
        algorithm=agl.Baseline(polling_interval=0.2, span_verbosity="none"),
        initial_resources={"main_llm": llm},
        progress=False,
    )
    try:
        trainer.dev(agent, tasks)
    finally:
        if proxy is not None:
            proxy.stop_in_thread()
    calls = sum(1 for r in fake.requests if r.method == "POST")
    run = AgentRun(path=path, tasks=tasks, model_calls=calls)
    run.records = asyncio.run(_records(store, path))
    return run


async def _records(store: InMemoryLightningStore, path: CapturePath) -> list[RolloutRecord]:
    adapter = LlmProxyTraceToTriplet() if path == "proxy" else TracerTraceToTriplet()
    records = []
    for rollout in await store.query_rollouts():
        spans = list(await store.query_spans(rollout.rollout_id, "latest"))
        doctor = await diagnose_rollout(store, rollout.rollout_id, adapter=adapter)
        records.append(
            RolloutRecord(rollout, spans, adapter.adapt(spans), TraceToMessages().adapt(spans), doctor)
        )
    return records


def check_run(
    run: AgentRun,
    *,
    calls_per_task: int = 2,
    token_ids: bool = True,
    tools_recorded: bool = True,
    tools: tuple[str, ...] = ("multiply",),
    allowed_problems: tuple[str, ...] = (),
) -> None:
    """What every framework must show on every path it supports.

    Every rollout succeeded; every model call is one LLM record (one triplet) with its prompt and
    completion; the first call asked for the ``multiply`` tool and the last one answered with the product;
    the rollout's reward (1.0) sits on its last triplet; ``TraceToMessages`` gives one trainable chat sample
    per call (the tool offered on the first; AutoGen's reflection turn offers none); ``agl doctor`` says OK.

    ``token_ids=False`` (a capture that cannot see them): no triplet has token ids and ``agl doctor``
    names exactly that (``missing_token_ids``). ``tools_recorded=False``: the capture does not record the
    tool definitions offered. ``tools``: the tools the framework offers (smolagents adds ``final_answer``).
    ``allowed_problems``: doctor warnings the framework's real behaviour causes (infos are always allowed).
    Every roll's chat roles are valid ones (``agl doctor`` would say ``invalid_roles``).
    """
    assert len(run.records) == len(run.tasks)
    assert run.model_calls == calls_per_task * len(run.tasks)
    for record in run.records:
        where = f"rollout {record.rollout.rollout_id} ({run.path} path)"
        assert record.rollout.status == "succeeded", f"{where}: {record.rollout.status}"
        triplets = record.triplets
        assert len(triplets) == calls_per_task, (
            f"{where}: {len(triplets)} LLM records, spans {_names(record)}"
        )
        for triplet in triplets:
            prompt, response = triplet.prompt["raw_content"], triplet.response["raw_content"]
            assert prompt and prompt[-1]["role"] in ("user", "tool"), f"{where}: prompt {prompt!r}"
            assert response, f"{where}: no completion recorded"
            has_ids = bool(triplet.prompt["token_ids"] and triplet.response["token_ids"])
            assert has_ids == token_ids, f"{where}: token ids {'missing' if token_ids else 'unexpected'}"
        first_reply, last_reply = (
            triplets[0].response["raw_content"][0],
            triplets[-1].response["raw_content"][0],
        )
        assert [c["function"]["name"] for c in first_reply["tool_calls"]] == ["multiply"], first_reply
        task = next(t for t in run.tasks if t == record.rollout.input)
        assert str(task["answer"]) in last_reply["content"], last_reply
        assert [t.reward for t in triplets] == [None] * (calls_per_task - 1) + [1.0]

        assert len(record.samples) == calls_per_task, f"{where}: {len(record.samples)} chat samples"
        for sample in record.samples:
            assert sample["messages"][-1]["role"] == "assistant"
            assert sorted(_tool_names(sample["tools"] or [])) in ([], sorted(tools)), sample["tools"]
            roles = {m["role"] for m in sample["messages"]}
            assert roles <= {"system", "developer", "user", "assistant", "tool"}, f"{where}: roles {roles}"
        if tools_recorded:
            assert sorted(_tool_names(record.samples[0]["tools"] or [])) == sorted(
                tools
            )  # offered first turn
        assert record.samples[-1]["messages"][-1]["content"] == last_reply["content"]

        report = record.doctor.report
        codes = [p.code for p in report.problems if p.severity != "info" and p.code not in allowed_problems]
        if token_ids:
            assert report.ok and not codes, f"{where}: agl doctor says\n{record.doctor.format()}"
        else:
            assert codes == ["missing_token_ids"], f"{where}: agl doctor says\n{record.doctor.format()}"


def _tool_names(tools: list[dict[str, Any]]) -> list[str]:
    return [str((tool.get("function") or tool).get("name")) for tool in tools]


def _names(record: RolloutRecord) -> list[str]:
    return [span.name for span in record.spans]


def capture_summary(run: AgentRun) -> dict[str, Any]:
    """What the first rollout's LLM records carry, per span name (for the docs' table)."""
    from agl_core.adapter.genai import read_llm_call

    record = run.records[0]
    by_name: dict[str, dict[str, Any]] = {}
    for span in record.spans:
        call = read_llm_call(span)
        if call is None:
            continue
        seen = by_name.setdefault(span.name, {"count": 0, "shape": call.shape})
        seen["count"] += 1
        fields = {
            "prompt": bool(call.prompt_messages),
            "completion": bool(call.completion_messages),
            "tools": bool(call.tools),
            "usage": call.usage.input_tokens is not None,
            "response_id": bool(call.response_id),
            "token_ids": bool(call.prompt_token_ids and call.response_token_ids),
            "logprobs": bool(call.logprobs),
        }
        for key, present in fields.items():
            seen[key] = seen.get(key, True) and present
    report = record.doctor.report
    return {
        "path": run.path,
        "status": record.rollout.status,
        "model_calls_per_rollout": run.model_calls // len(run.tasks),
        "calls_recorded": report.llm_span_count,
        "triplets_per_rollout": len(record.triplets),
        "samples_per_rollout": len(record.samples),
        "triplets_with_token_ids": sum(
            bool(t.prompt["token_ids"] and t.response["token_ids"]) for t in record.triplets
        ),
        "llm_spans": by_name,
        "doctor_ok": record.doctor.report.ok,
        "doctor_problems": record.doctor.report.codes(),
    }
