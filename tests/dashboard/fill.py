"""Fill a SQLite store for the dashboard tests: a real training loop, hostile spans, a huge rollout."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import agl_core as agl
from agl_core.store import LightningStore, open_store
from agl_core.types import Event, TraceStatus
from agl_testing.fake_openai import FakeOpenAIServer
from agl_testing.store_conformance import make_span

ROOT = Path(__file__).resolve().parents[2]
XSS_MARK = "__agl_xss"
"""A page global that any payload below would set if the browser ever ran it."""

HOSTILE_TEXT = (
    f'<script>window.{XSS_MARK}=1</script><img src=x onerror="window.{XSS_MARK}=2">'
    f'<a href="javascript:window.{XSS_MARK}=3">click me</a><b>bold?</b>'
)
PROMPT_V1 = "You are a calculator.\nAnswer with a number.\nUse the tool."
PROMPT_V2 = "You are a careful calculator.\nAnswer with a number.\nAlways use the tool.\nShow the result."


def train_into(path: Path, samples: int = 12) -> None:
    """Run the baseline calculator agent through `Trainer` (2 runner threads) into the store at path."""
    sys.path.insert(0, str(ROOT / "examples" / "baseline_agent"))
    from agent import calculator_agent
    from train import make_tasks, scripted_model

    tasks = make_tasks(samples + 4)
    with FakeOpenAIServer(scripted_model, token_ids="always") as model:
        trainer = agl.Trainer(
            n_runners=2,
            strategy="shm",
            store=f"sqlite:///{path}",
            algorithm=agl.Baseline(n_epochs=1, max_queue_length=8, span_verbosity="none"),
            initial_resources={
                "main_llm": agl.LLM(endpoint=model.base_url, model="fake-calculator-model"),
                "prompt": agl.PromptTemplate(template=PROMPT_V1, engine="f-string"),
            },
            progress=False,
        )
        trainer.fit(calculator_agent, tasks[:samples], val_dataset=tasks[samples:])


def train_through_proxy(path: Path) -> None:
    """One rollout of the calculator agent through the LLM proxy with the tracer's `openai` capture on too
    (as `make demo` runs): every model call has two records, the proxy's and the tracer's."""
    from agent import calculator_agent
    from train import make_tasks, scripted_model

    from agl_core.llm_proxy import LLMProxy

    with FakeOpenAIServer(scripted_model, token_ids="always") as model:
        proxy_store = open_store(f"sqlite:///{path}")
        proxy = LLMProxy({"fake-calculator-model": model.base_url}, store=proxy_store).start_in_thread()
        try:
            trainer = agl.Trainer(
                n_runners=1,
                strategy="shm",
                store=f"sqlite:///{path}",
                algorithm=agl.Baseline(polling_interval=0.2, span_verbosity="none"),
                initial_resources={
                    "main_llm": proxy.as_resource(),
                    "prompt": agl.PromptTemplate(template=PROMPT_V1, engine="f-string"),
                },
                progress=False,
            )
            trainer.dev(calculator_agent, [{**make_tasks(1)[0], "via": "proxy"}])
        finally:
            proxy.stop_in_thread()


async def add_hostile_rollout(store: LightningStore) -> str:
    """A rollout whose input, span names, attributes, chat messages and tool results carry HTML/script."""
    started = await store.start_rollout({"question": HOSTILE_TEXT}, mode="train")
    rid, aid = started.rollout_id, started.attempt.attempt_id
    messages_in = [
        {"role": "system", "parts": [{"type": "text", "content": HOSTILE_TEXT}]},
        {
            "role": "user",
            "parts": [{"type": "text", "content": '<iframe src="javascript:alert(1)"></iframe>'}],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": HOSTILE_TEXT}]},
    ]
    messages_out = [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": HOSTILE_TEXT},
                {
                    "type": "tool_call",
                    "id": "c2",
                    "name": "<svg onload=alert(1)>",
                    "arguments": {"x": HOSTILE_TEXT},
                },
            ],
        }
    ]
    spans = [
        make_span(
            rid,
            aid,
            1,
            name=HOSTILE_TEXT,
            start_time=1.0e9,
            attributes={"html": HOSTILE_TEXT, "link": "javascript:alert(1)"},
        ),
        make_span(
            rid,
            aid,
            2,
            name="chat <b>model</b>",
            start_time=1.0e9 + 1,
            attributes={
                "gen_ai.input.messages": json.dumps(messages_in),
                "gen_ai.output.messages": json.dumps(messages_out),
                "prompt_token_ids": [1, 2, 3],
                "response_token_ids": [4, 5],
            },
        ),
        make_span(
            rid,
            aid,
            3,
            name="agentlightning.annotation",
            start_time=1.0e9 + 2,
            attributes={"agentlightning.reward.0.name": HOSTILE_TEXT, "agentlightning.reward.0.value": 0.5},
        ),
    ]
    failing = make_span(rid, aid, 4, name="tool <i>calc</i>", start_time=1.0e9 + 3)
    spans.append(
        failing.model_copy(
            update={
                "status": TraceStatus(status_code="ERROR", description=HOSTILE_TEXT),
                "events": [
                    Event(
                        name="exception",
                        attributes={"exception.type": "ValueError", "exception.message": HOSTILE_TEXT},
                        timestamp=1.0e9 + 3.1,
                    )
                ],
            }
        )
    )
    await store.add_many_spans(spans)
    await store.update_attempt(rid, aid, status="failed")
    return rid


async def add_big_rollout(
    store: LightningStore, n_spans: int = 5000, big_bytes: int = 10 * 1024 * 1024
) -> str:
    """A rollout with `n_spans` nested spans, one of which has a `big_bytes` attribute."""
    started = await store.start_rollout({"question": "big"}, mode="val")
    rid, aid = started.rollout_id, started.attempt.attempt_id
    t0 = 1.0e9
    spans = []
    root_id = format(1, "016x")
    for i in range(1, n_spans + 1):
        attributes: dict[str, object] = {"index": i}
        if i == 2:
            attributes["blob"] = "x" * big_bytes
        spans.append(
            make_span(
                rid,
                aid,
                i,
                name=f"step-{i}",
                span_id=format(i, "016x"),
                parent_id=None if i == 1 else root_id if i % 10 == 2 else format(i - 1, "016x"),
                start_time=t0 + i * 0.001,
                attributes=attributes,
            )
        )
    for start in range(0, len(spans), 500):
        await store.add_many_spans(spans[start : start + 500])
    await store.update_attempt(rid, aid, status="succeeded")
    return rid


async def add_prompt_version(store: LightningStore) -> None:
    """A second resources version whose prompt template differs from the first (for the diff view)."""
    latest = await store.get_latest_resources()
    resources = dict(latest.resources) if latest else {}
    resources["prompt"] = agl.PromptTemplate(template=PROMPT_V2, engine="f-string")
    await store.add_resources(resources)


def fill(path: Path, samples: int = 12) -> dict[str, str]:
    """Train into the store at path, then add the hostile rollout, the big one and a second prompt version."""
    train_into(path, samples)
    train_through_proxy(path)

    async def extras() -> dict[str, str]:
        store = open_store(f"sqlite:///{path}")
        try:
            (twice,) = [r.rollout_id for r in await store.query_rollouts() if r.input.get("via") == "proxy"]
            await add_prompt_version(store)
            return {
                "hostile": await add_hostile_rollout(store),
                "big": await add_big_rollout(store),
                "twice": twice,
            }
        finally:
            await store.close()

    return asyncio.run(extras())


if __name__ == "__main__":
    print(json.dumps(fill(Path(sys.argv[1]))))
