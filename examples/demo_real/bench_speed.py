"""Generation and training speed of the real model on this machine, printed as JSON.

    python examples/demo_real/bench_speed.py [--requests 32] [--concurrency 1,8,32]

Generation: ``--requests`` chat requests of the demo's first turn sent to the local Tinker sampler
(``agl_tinker.local``), ``concurrency`` at a time, so requests in flight together are batched into one
forward pass per token (KV cache on). Training: one LoRA ``forward_backward`` + ``optim_step`` on
sequences of the demo's length. Reports requests/s and generated tokens/s, and trained tokens/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent import EXAMPLE, SYSTEM
from model import ensure_model
from tasks import make_tasks
from tinker import types

from agl_tinker.data import datum_from_call
from agl_tinker.local import LocalServiceClient


async def bench(requests: int, levels: list[int], train_rows: int) -> dict[str, object]:
    """Run the measurements and return them."""
    folder = ensure_model()
    service = LocalServiceClient(checkpoint_dir=Path(".agl/demo-real-bench"))
    client = await service.create_lora_training_client(str(folder), rank=16)
    sampler = await client.save_weights_and_get_sampling_client()
    tok = client.get_tokenizer()
    _, tasks = make_tasks(0, requests, seed=7)
    prompts = [
        tok.apply_chat_template(
            [{"role": "system", "content": SYSTEM}, *EXAMPLE, {"role": "user", "content": t["question"]}],
            tokenize=True,
            add_generation_prompt=True,
        )
        for t in tasks
    ]
    prompts = [list(p["input_ids"] if hasattr(p, "keys") else p) for p in prompts]
    params = types.SamplingParams(max_tokens=16, temperature=1.0, stop=[tok.eos_token_id])
    result: dict[str, object] = {"model": folder.name, "threads": os.environ["OMP_NUM_THREADS"]}
    samples = []
    for level in levels:
        gate = asyncio.Semaphore(level)

        async def one(prompt: list[int], gate: asyncio.Semaphore = gate) -> types.SampleResponse:
            async with gate:
                return await sampler.sample(types.ModelInput.from_ints(prompt), 1, params)

        t0 = time.perf_counter()
        responses = await asyncio.gather(*(one(p) for p in prompts))
        seconds = time.perf_counter() - t0
        generated = sum(len(r.sequences[0].tokens) for r in responses)
        samples = [(p, r.sequences[0]) for p, r in zip(prompts, responses, strict=True)]
        result[f"generate_concurrency_{level}"] = {
            "requests_per_s": round(requests / seconds, 2),
            "generated_tokens_per_s": round(generated / seconds, 1),
            "seconds": round(seconds, 1),
        }
    data = [
        datum_from_call(p, s.tokens, s.logprobs, 1.0, "importance_sampling") for p, s in samples[:train_rows]
    ]
    tokens = sum(d.model_input.length for d in data)
    t0 = time.perf_counter()
    await client.forward_backward(data, "importance_sampling")
    await client.optim_step(adam_params=types.AdamParams(learning_rate=1e-4))
    seconds = time.perf_counter() - t0
    result["train_lora_r16"] = {
        "sequences": len(data),
        "tokens": tokens,
        "seconds": round(seconds, 1),
        "tokens_per_s": round(tokens / seconds, 1),
    }
    return result


def main() -> None:
    """Command line."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--train-rows", type=int, default=16)
    args = parser.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]
    print(json.dumps(asyncio.run(bench(args.requests, levels, args.train_rows)), indent=2))


if __name__ == "__main__":
    main()
