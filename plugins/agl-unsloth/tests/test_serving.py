"""The transformers serving backend batches concurrent requests without changing what each one gets."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from agl_unsloth.serving import TransformersChatBackend

SYSTEM = {"role": "system", "content": "You are a terse assistant. Reply with digits only, like 417."}


def _request(question: str, **extra: object) -> dict[str, object]:
    return {"messages": [SYSTEM, {"role": "user", "content": question}], "max_tokens": 6, **extra}


async def test_concurrent_requests_share_a_batch_and_match_single_requests(tiny_model: Path) -> None:
    backend = TransformersChatBackend(tiny_model, model="m", max_tokens=6, temperature=0.0)
    batches: list[int] = []
    generate = backend._generate_batch
    backend._generate_batch = lambda batch: (batches.append(len(batch)), generate(batch))[1]  # type: ignore[method-assign]
    questions = ["What is 3?", "Say 42 please.", "Reply 7", "Numbers: one hundred and five?"]
    together = await asyncio.gather(*(backend.chat_completions(_request(q)) for q in questions))
    assert sum(batches) == len(questions) and len(batches) < len(questions)  # they shared forward passes
    alone = [await backend.chat_completions(_request(q)) for q in questions]
    for a, b in zip(together, alone, strict=True):  # greedy: padding and the shared prefix change nothing
        assert a["choices"][0]["token_ids"] == b["choices"][0]["token_ids"]
        assert a["prompt_token_ids"] == b["prompt_token_ids"]


async def test_sampled_logprobs_are_the_models_own(tiny_model: Path) -> None:
    backend = TransformersChatBackend(tiny_model, model="m", max_tokens=6, temperature=1.0)
    answers = await asyncio.gather(
        *(backend.chat_completions(_request(q, n=2)) for q in ("Give 12", "Give me 345 now"))
    )
    lm = backend._lm
    for answer in answers:
        prompt = answer["prompt_token_ids"]
        for choice in answer["choices"]:
            tokens = choice["token_ids"]
            logged = [entry["logprob"] for entry in choice["logprobs"]["content"]]
            with torch.no_grad():
                logits = lm(input_ids=torch.tensor([prompt + tokens])).logits[0].float()
            logp = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
            recomputed = logp.gather(-1, torch.tensor(tokens).unsqueeze(-1)).squeeze(-1).tolist()
            assert logged == pytest.approx(recomputed, abs=1e-4)
