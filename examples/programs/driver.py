"""What every program example runs: its agent on the two tasks through the agl proxy, one prompt step.

``main(make_agent)`` is each ``train.py``'s command line. ``train(agent, ...)`` starts an LLM proxy in
front of the model server (``model_url``; the local scripted fake model when None), trains ``agent`` -- a
:class:`agl.ProgramAgent` -- with :class:`PromptStep` over the tasks on the chosen strategy, and returns
what it found: the step's scores and best prompt, and per rollout the LLM calls the proxy recorded, their
token ids, the reward and ``agl doctor``'s verdict.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prompt_step import PromptStep
from tasks import PROMPTS, TASKS, TOOL_TASK, USE_TOOLS, scripted_model

import agl_core as agl
from agl_core.adapter.doctor import diagnose_rollout
from agl_core.emitter import find_final_reward
from agl_core.llm_proxy import LLMProxy
from agl_core.program import PROGRAM_SPAN
from agl_core.store.memory import InMemoryLightningStore
from agl_testing.agent_clis import install_agent_clis
from agl_testing.fake_openai import FakeOpenAIServer

PROXY_SPAN = "agl.llm_proxy.request"
HERE = Path(__file__).resolve().parent


def npm_clis() -> Path:
    """Install Claude Code and the Codex CLI, pinned in ``clis/``, into the repository's ``.agl/npm`` (once:
    nothing to do when the same lock file is installed there); return that folder.

    Raises:
        SystemExit: the agl-proxy-translate plugin is missing: the proxy answers their Messages and
            Responses requests only with it.
    """
    if importlib.util.find_spec("agl_proxy_translate") is None:
        raise SystemExit(
            "Claude Code and the Codex CLI call the proxy's Messages/Responses routes, which need the "
            "agl-proxy-translate plugin: pip install agl-proxy-translate (make test-programs installs it)."
        )
    return install_agent_clis(HERE / "clis", HERE.parents[1] / ".agl" / "npm")


@dataclass
class RolloutReport:
    """One rollout of the run, as the examples' tests and READMEs report it."""

    rollout_id: str
    kind: str
    prompt: str
    status: str
    calls_made: int | None
    """Requests the model server answered for this rollout (offline only)."""
    llm_calls: int
    with_token_ids: int
    exact_token_ids: int
    """Calls whose prompt and response ids all decode with the fake model's tokenizer: the model server's own
    ids, unchanged (counted offline only; with a real server it equals ``with_token_ids``)."""
    reward: float | None
    doctor_ok: bool
    program: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunReport:
    """The whole run: the prompt step's scores and choice, every rollout, and the model's request count."""

    scores: dict[str, float]
    best: str | None
    rollouts: list[RolloutReport]
    model_requests: int | None


def _conversation_key(request: dict[str, Any]) -> tuple[str, bool]:
    """Which rollout a model request belongs to: its task kind and whether the tool prompt was in it."""
    text = json.dumps(request.get("messages", []))
    return ("tool" if TOOL_TASK["question"] in text else "plain", USE_TOOLS in text)


@contextlib.contextmanager
def model_server(
    model_url: str | None, made: Counter[tuple[str, bool]]
) -> Iterator[tuple[str, FakeOpenAIServer | None]]:
    """``model_url``, or the scripted fake model on a local port (token ids on every answer, as vLLM),
    counting in ``made`` the requests it answers per task kind and prompt."""
    if model_url is not None:
        yield model_url, None
        return

    def counted(request: dict[str, Any]) -> Any:
        made[_conversation_key(request)] += 1
        return scripted_model(request)

    with FakeOpenAIServer(counted, token_ids="always") as server:
        yield server.base_url, server


def _decodes(fake: FakeOpenAIServer | None, ids: Any) -> bool:
    if fake is None:
        return True
    try:
        fake.tokenizer.decode(ids)
    except KeyError:
        return False
    return True


async def _report(
    store: InMemoryLightningStore,
    resources_prompts: dict[str, str],
    fake: FakeOpenAIServer | None,
    made: Counter[tuple[str, bool]],
) -> list[RolloutReport]:
    out = []
    for rollout in await store.query_rollouts():
        spans = list(await store.query_spans(rollout.rollout_id, "latest"))
        calls = [s for s in spans if s.name == PROXY_SPAN]
        with_ids = [
            s
            for s in calls
            if s.attributes.get("prompt_token_ids") and s.attributes.get("response_token_ids")
        ]
        exact = [
            s
            for s in with_ids
            if _decodes(fake, s.attributes["prompt_token_ids"])
            and _decodes(fake, s.attributes["response_token_ids"])
        ]
        doctor = await diagnose_rollout(store, rollout.rollout_id, adapter="proxy-triplet")
        program = next((dict(s.attributes) for s in spans if s.name == PROGRAM_SPAN), {})
        kind = str(rollout.input.get("kind"))
        prompt = resources_prompts.get(rollout.resources_id or "", "")
        out.append(
            RolloutReport(
                rollout_id=rollout.rollout_id,
                kind=kind,
                prompt=prompt,
                calls_made=None if fake is None else made[(kind, USE_TOOLS in prompt)],
                status=rollout.status,
                llm_calls=len(calls),
                with_token_ids=len(with_ids),
                exact_token_ids=len(exact),
                reward=find_final_reward(spans),
                doctor_ok=doctor.report.ok,
                program=program,
            )
        )
    return out


def train(
    agent: agl.ProgramAgent,
    *,
    tasks: Sequence[dict[str, Any]] = TASKS,
    prompts: Sequence[str] = PROMPTS,
    model_url: str | None = None,
    model: str = "policy",
    strategy: str = "shm",
    n_runners: int = 2,
) -> RunReport:
    """Run ``agent`` on ``tasks`` under one :class:`PromptStep` over ``prompts``; report every rollout.

    The proxy serves ``model`` (``"*"``: any name the program sends) from the model server.
    """
    store = InMemoryLightningStore()
    step = PromptStep(prompts)
    made: Counter[tuple[str, bool]] = Counter()
    with model_server(model_url, made) as (url, fake), LLMProxy({model: url}, store=store) as proxy:
        trainer = agl.Trainer(
            strategy=strategy,
            n_runners=n_runners,
            port=0,
            store=store,
            algorithm=step,
            adapter="proxy-triplet",
            llm_proxy=proxy,
            initial_resources={"llm": proxy.as_resource(model="policy" if model == "*" else model)},
            progress=False,
        )
        trainer.fit(agent, list(tasks))
        requests = None if fake is None else len(fake.requests)

        async def collect() -> list[RolloutReport]:
            assert await proxy.flush(timeout=30)
            prompts_by_id = {}
            for update in await store.query_resources():
                prompt = update.resources.get("prompt")
                if prompt is not None:
                    prompts_by_id[update.resources_id] = getattr(prompt, "template", "")
            return await _report(store, prompts_by_id, fake, made)

        rollouts = asyncio.run(collect())
    return RunReport(step.scores, step.best, rollouts, requests)


def print_report(report: RunReport) -> None:
    """The run as a table: one line per rollout, then the step's scores and choice."""
    header = f"{'made':>4} {'calls':>5} {'ids':>4} {'exact':>5} {'reward':>6}"
    print(f"{'kind':6} {'status':10} {header} doctor  prompt")
    for r in report.rollouts:
        reward = "-" if r.reward is None else f"{r.reward:g}"
        doctor = "OK" if r.doctor_ok else "NO"
        made = "-" if r.calls_made is None else str(r.calls_made)
        counts = f"{made:>4} {r.llm_calls:5} {r.with_token_ids:4} {r.exact_token_ids:5}"
        print(f"{r.kind:6} {r.status:10} {counts} {reward:>6} {doctor:6}  {r.prompt!r}")
    for prompt, score in report.scores.items():
        print(f"score {score:.2f}  {prompt!r}")
    print(f"best prompt: {report.best!r}; model requests: {report.model_requests}")


def main(
    make_agent: Callable[[], agl.ProgramAgent], *, model: str = "policy", doc: str | None = None
) -> None:
    """An example's command line: train the agent ``make_agent()`` builds and print the report.

    ``--model-url`` names an OpenAI-compatible server (default: the scripted fake model), ``--model`` the
    model name(s) the proxy serves from it (``model`` by default; ``"*"``: any name the program sends) and
    ``--strategy`` the execution strategy.
    """
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument(
        "--model-url", default=None, help="An OpenAI-compatible server (default: the fake model)."
    )
    parser.add_argument("--model", default=model, help="The model name(s) the proxy serves from --model-url.")
    parser.add_argument("--strategy", default="shm", choices=["shm", "cs"])
    args = parser.parse_args()
    print_report(train(make_agent(), model_url=args.model_url, model=args.model, strategy=args.strategy))
