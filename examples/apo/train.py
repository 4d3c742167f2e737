"""Optimize the room-booking agent's prompt with APO (plugin ``agl-apo``).

Against any OpenAI-compatible endpoint (OpenAI, vLLM, LiteLLM, ...)::

    export OPENAI_API_KEY=...            # not needed for a local server
    python examples/apo/train.py --base-url https://api.openai.com/v1 --model gpt-4.1-mini \\
        --optimizer-model gpt-4.1-mini

Offline, against scripted models on a local fake server (no key, no network, about a minute on a laptop)::

    python examples/apo/train.py --offline

The run state lives in a SQLite store (``--store``), so an interrupted run continues with
``--run-id <id> --resume``. The best prompt, a score plot and the run state are written to
``apo_runs/<run-id>/``. ``--estimate`` prints the number of model calls and tokens a run needs and exits.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from room_booking import SEED_PROMPT, make_tasks, room_booking_agent

import agl_core as agl

# Rough (input, output) tokens of one call of this example, for --estimate: prompt lengths at ~4 characters
# per token, answers of a non-reasoning model. Reasoning models add hidden reasoning tokens to the output.
TASK_TOKENS = (160, 60)
CRITIQUE_TOKENS = (1500, 350)
EDIT_TOKENS = (600, 250)


def estimate(args: argparse.Namespace, n_val: int) -> dict[str, int]:
    """Upper bound of the calls and tokens of a run with these settings."""
    children = args.beam_width * args.branch_factor
    per_round = children * args.gradient_batch + (args.beam_width + children) * args.val_batch + n_val
    task_calls = n_val + args.rounds * per_round
    critiques = edits = args.rounds * children
    return {
        "task_calls": task_calls,
        "optimizer_calls": critiques + edits,
        "input_tokens": task_calls * TASK_TOKENS[0] + critiques * CRITIQUE_TOKENS[0] + edits * EDIT_TOKENS[0],
        "output_tokens": task_calls * TASK_TOKENS[1]
        + critiques * CRITIQUE_TOKENS[1]
        + edits * EDIT_TOKENS[1],
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--base-url", help="OpenAI-compatible endpoint of the task and optimizer models")
    where.add_argument("--offline", action="store_true", help="use scripted models on a local fake server")
    parser.add_argument("--model", help="task model the agent uses (required with --base-url)")
    parser.add_argument("--optimizer-model", help="model for critiques and edits (default: --model)")
    parser.add_argument("--api-key", help="API key (default: $OPENAI_API_KEY)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--beam-width", type=int, default=2)
    parser.add_argument("--branch-factor", type=int, default=2)
    parser.add_argument("--gradient-batch", type=int, default=4)
    parser.add_argument("--val-batch", type=int, default=8)
    parser.add_argument("--train-size", type=int, default=24)
    parser.add_argument("--val-size", type=int, default=16)
    parser.add_argument("--n-runners", type=int, default=4)
    parser.add_argument(
        "--strategy", choices=["shm", "cs"], default="shm", help="runner threads or processes"
    )
    parser.add_argument("--run-id", default=None, help="name of the run (default: generated)")
    parser.add_argument("--resume", action="store_true", help="continue the run --run-id from its store")
    parser.add_argument("--store", default="sqlite:///apo_runs/apo-store.db", help="store URI")
    parser.add_argument("--output-dir", default=None, help="report folder (default: apo_runs/<run-id>)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--estimate", action="store_true", help="print the cost estimate and exit")
    parser.add_argument("--json", action="store_true", help="print a JSON summary line at the end")
    args = parser.parse_args(argv)
    if args.base_url and not args.model:
        parser.error("--model is required with --base-url")
    return args


def _ensure_store_dir(uri: str) -> None:
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:///:memory:"):
        path = uri[len("sqlite:///") :]
        Path(path).parent.mkdir(parents=True, exist_ok=True)


def run(
    args: argparse.Namespace, base_url: str, task_model: str, gradient_model: str, edit_model: str
) -> dict[str, Any]:
    """Run APO with the Trainer and return a summary."""
    train = make_tasks(args.train_size, seed=args.seed)
    val = make_tasks(args.val_size, seed=args.seed + 1)
    apo = agl.APO(
        base_url=base_url,
        api_key=args.api_key,
        gradient_model=gradient_model,
        apply_edit_model=edit_model,
        beam_rounds=args.rounds,
        beam_width=args.beam_width,
        branch_factor=args.branch_factor,
        gradient_batch_size=args.gradient_batch,
        val_batch_size=args.val_batch,
        run_id=args.run_id,
        resume=args.resume,
        output_dir=args.output_dir,
        seed=args.seed,
        progress=False if args.json else None,
    )
    _ensure_store_dir(args.store)
    trainer = agl.Trainer(
        algorithm=apo,
        n_runners=args.n_runners,
        strategy=args.strategy,
        store=args.store,
        adapter="messages",
        initial_resources={
            "prompt_template": agl.PromptTemplate(template=SEED_PROMPT, engine="f-string"),
            "llm": agl.LLM(endpoint=base_url, model=task_model, api_key=args.api_key),
        },
        progress=False,  # APO draws its own live view of rounds and candidates
    )
    trainer.fit(room_booking_agent, train, val_dataset=val)
    state = apo.state
    assert state is not None and apo.report is not None
    seed = state.candidate("v0")
    return {
        "run_id": state.run_id,
        "rounds": state.completed_rounds,
        "seed_score": seed.full_val_score,
        "best_version": state.best_version,
        "best_score": state.best_score,
        "best_prompt_file": str(apo.report.best_prompt),
        "plot_file": str(apo.report.plot),
        "optimizer_usage": apo.optimizer.usage.as_dict(),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.estimate:
        cost = estimate(args, args.val_size)
        print(json.dumps(cost))
        return cost
    if args.offline:
        from offline_models import CRITIC_MODEL, EDITOR_MODEL, TASK_MODEL, OfflineModels

        from agl_testing.fake_openai import FakeOpenAIServer

        args.api_key = args.api_key or "offline"
        with FakeOpenAIServer(
            OfflineModels(args.seed), models=[TASK_MODEL, CRITIC_MODEL, EDITOR_MODEL]
        ) as srv:
            summary = run(args, srv.base_url, TASK_MODEL, CRITIC_MODEL, EDITOR_MODEL)
    else:
        optimizer = args.optimizer_model or args.model
        summary = run(args, args.base_url, args.model, optimizer, optimizer)
    if args.json:
        print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
