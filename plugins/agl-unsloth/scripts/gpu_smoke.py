"""GPU smoke run of agl-unsloth: tiny local model, two SFT iterations with engine=unsloth, no network."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import aiohttp

from agl_core.litagent import rollout
from agl_core.runner import LitAgentRunner
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer import OtelTracer
from agl_core.types import LLM
from agl_unsloth.algorithm import SFT
from agl_unsloth.testing import build_tiny_model


@rollout
async def digits_agent(task: dict[str, str], llm: LLM) -> float:
    """One call; reward = share of digits in the reply."""
    body = {"model": llm.model, "messages": [{"role": "user", "content": task["q"]}], "max_tokens": 6}
    async with aiohttp.ClientSession() as s, s.post(f"{llm.endpoint}/chat/completions", json=body) as r:
        r.raise_for_status()
        text = (await r.json())["choices"][0]["message"]["content"] or ""
    chars = [c for c in text if not c.isspace()]
    return sum(c.isdigit() for c in chars) / len(chars) if chars else 0.0


async def main(engine: str) -> None:
    """Build the model, run the algorithm with two runners, print the metrics rows."""
    root = Path(tempfile.mkdtemp(prefix="agl-unsloth-smoke-"))
    model = build_tiny_model(root / "model")
    algo = SFT(
        model_name=model,
        engine=engine,
        n_iterations=2,
        rollouts_per_task=8,
        top_k=8,  # type: ignore[arg-type]
        learning_rate=5e-3,
        epochs=4,
        lora_rank=8,
        max_tokens=6,
        run_dir=root / "run",
        progress=False,
    )
    store = InMemoryLightningStore()
    algo.set_store(store)
    stop = threading.Event()
    runners = [
        LitAgentRunner[Any](OtelTracer(), heartbeat_interval=0, poll_interval=0.02).run_context(
            agent=digits_agent, store=store, worker_id=i
        )
        for i in range(2)
    ]
    entered = [r.__enter__() for r in runners]
    loops = [asyncio.create_task(r.iter(event=stop)) for r in entered]
    try:
        await algo.run([{"q": f"Answer with digits only, e.g. {n}."} for n in (7, 42, 305, 9)])
    finally:
        stop.set()
        await asyncio.gather(*loops)
        for r in runners:
            r.__exit__(None, None, None)
    for line in (root / "run" / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        print(
            f"iteration {row['iteration']}: reward {row['reward_mean']:.3f} kept {row['kept']} "
            f"loss {row.get('loss_first')} -> {row.get('loss_last')}"
        )
    print("manifest:", root / "run" / "manifest.json")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "unsloth"))
