"""A tiny Qwen2-style model and ChatML tokenizer built from scratch (no downloads), for offline tests.

:func:`build_tiny_model` is :func:`agl_core.utils.tiny_model.build_tiny_qwen2` with agl-tinker's corpus and
sizes (about 2.5M parameters); see there why the tokenizer reloads with the same ids.
"""

from __future__ import annotations

import random
from pathlib import Path

from agl_core.utils.tiny_model import CHATML_TEMPLATE, SPECIAL_TOKENS, build_tiny_qwen2

__all__ = ["CHATML_TEMPLATE", "SPECIAL_TOKENS", "build_tiny_model"]

_WORDS = [
    "the",
    "a",
    "an",
    "answer",
    "question",
    "reply",
    "digit",
    "number",
    "word",
    "say",
    "copy",
    "repeat",
    "please",
    "with",
    "only",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "zero",
    "yes",
    "no",
    "ok",
    "user",
    "assistant",
    "system",
    "task",
    "agent",
    "model",
    "token",
    "right",
    "wrong",
    "good",
    "bad",
    "small",
    "large",
    "fast",
    "slow",
    "red",
    "green",
    "blue",
    "left",
    "up",
    "down",
]


def _corpus(seed: int, lines: int) -> list[str]:
    rng = random.Random(seed)
    out: list[str] = []
    for _ in range(lines):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(3, 10))]
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 4)))
        out.append(f"{' '.join(words).capitalize()} {digits}. {rng.choice(_WORDS)}!")
    return out


def build_tiny_model(
    path: str | Path,
    *,
    hidden_size: int = 256,
    num_layers: int = 4,
    vocab_size: int = 400,
    seed: int = 0,
) -> Path:
    """Build and save a tiny tokenizer + Qwen2 causal LM (about 2.5M params by default) under ``path``.

    The folder then loads with ``AutoTokenizer``/``AutoModelForCausalLM.from_pretrained(path)``; it holds
    config.json, model.safetensors, tokenizer.json, tokenizer_config.json and the chat template.
    Returns ``path``.
    """
    return build_tiny_qwen2(
        path,
        _corpus(seed, 400),
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_layers=num_layers,
        max_position_embeddings=512,
        seed=seed,
    )
