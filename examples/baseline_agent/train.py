"""Run the calculator agent with `Baseline` against a local fake OpenAI server, fully offline.

    python examples/baseline_agent/train.py [--strategy shm|cs] [--n-runners 2] [--samples 12] [--json]

The fake model (``agl_testing.fake_openai.FakeOpenAIServer``) is scripted to behave like a decent
tool-using model: it calls the calculator, then answers with the tool's result. For every fourth question
it skips the tool and guesses wrong, so the rewards are not all 1. After the run the script reads the
spans back from the store and turns them into training triplets with the trainer's adapter.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent import MathTask, calculate, calculator_agent

import agl_core as agl
from agl_core.emitter import find_final_reward
from agl_testing.fake_openai import FakeOpenAIServer, Reply, ToolCall

_EXPRESSION = re.compile(r"What is (.+)\?")


def make_tasks(n: int) -> list[MathTask]:
    """``n`` arithmetic questions with their answers."""
    tasks: list[MathTask] = []
    for i in range(n):
        expression = f"{i + 3} * {i + 7} - {i}"
        tasks.append({"question": f"What is {expression}?", "answer": calculate(expression)})
    return tasks


def scripted_model(request: dict[str, Any]) -> Reply:
    """The fake model's policy: call the calculator, then report its result (or guess, every 4th task)."""
    last = request["messages"][-1]
    if last["role"] == "tool":
        return Reply(content=f"The answer is {last['content']}.")
    match = _EXPRESSION.search(str(last["content"]))
    if match is None:
        return Reply(content="I can only do arithmetic.")
    expression = match.group(1)
    if int(expression.split()[0]) % 4 == 2:  # a lazy guess instead of a tool call: reward 0
        return Reply(content="The answer is 42.")
    return Reply(tool_calls=[ToolCall("calculator", {"expression": expression})])


async def summarize(trainer: agl.Trainer) -> dict[str, Any]:
    """Read rollouts and spans back from the store and adapt them into triplets."""
    store = trainer.store
    rollouts = list(await store.query_rollouts())
    rewards: list[float] = []
    triplets: list[agl.Triplet] = []
    for rollout in rollouts:
        spans = list(await store.query_spans(rollout.rollout_id, "latest"))
        reward = find_final_reward(spans)
        if reward is not None:
            rewards.append(reward)
        triplets.extend(trainer.adapter(spans))
    statuses: dict[str, int] = {}
    for rollout in rollouts:
        statuses[rollout.status] = statuses.get(rollout.status, 0) + 1
    return {
        "rollouts": len(rollouts),
        "statuses": statuses,
        "mean_reward": sum(rewards) / len(rewards) if rewards else None,
        "triplets": len(triplets),
        "llm_calls_per_rollout": len(triplets) / len(rollouts) if rollouts else 0,
        "triplets_with_token_ids": sum(
            1 for t in triplets if t.prompt["token_ids"] and t.response["token_ids"]
        ),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--strategy", choices=["shm", "cs"], default="shm")
    parser.add_argument("--n-runners", type=int, default=2)
    parser.add_argument("--samples", type=int, default=12, help="training questions (validation adds 4)")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    tasks = make_tasks(args.samples + 4)
    with FakeOpenAIServer(scripted_model, token_ids="always") as model:
        trainer = agl.Trainer(
            n_runners=args.n_runners,
            strategy=args.strategy,
            port=0,
            algorithm=agl.Baseline(n_epochs=1, max_queue_length=8, span_verbosity="none"),
            initial_resources={"main_llm": agl.LLM(endpoint=model.base_url, model="fake-calculator-model")},
            progress=not args.json,
        )
        trainer.fit(calculator_agent, tasks[: args.samples], val_dataset=tasks[args.samples :])
        summary = asyncio.run(summarize(trainer))
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{summary['rollouts']} rollouts {summary['statuses']}, "
            f"mean reward {summary['mean_reward']:.3f}, "
            f"{summary['triplets']} triplets ({summary['llm_calls_per_rollout']:.2f} LLM calls per rollout, "
            f"{summary['triplets_with_token_ids']} with token ids)"
        )
    return summary


if __name__ == "__main__":
    main()
