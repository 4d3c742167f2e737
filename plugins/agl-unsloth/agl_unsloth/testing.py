"""Build a tiny Qwen2-style causal LM and a ChatML tokenizer locally (no downloads) for tests and smoke runs.

:func:`build_tiny_model` is :func:`agl_core.utils.tiny_model.build_tiny_qwen2` with agl-unsloth's corpus and
sizes; the chat template marks assistant turns with ``{% generation %}`` so TRL masks everything else out
of the loss.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

from agl_core.utils.tiny_model import CHATML_TEMPLATE, build_tiny_qwen2

__all__ = ["CHAT_TEMPLATE", "build_tiny_model"]

CHAT_TEMPLATE = CHATML_TEMPLATE
"""ChatML with ``{% generation %}`` around each assistant reply (and its ``<|im_end|>``)."""

_VOCAB_TEXT = (
    "say answer reply with only the word token agent user system assistant please write copy "
    "yes no ok cat dog sun moon red blue green one two three four five six seven eight nine ten "
    "a an is it this that what how why good bad fine hello world task done right wrong"
)


def _lines(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words = " ".join(rng.choices(_VOCAB_TEXT.split(), k=rng.randint(2, 9)))
        number = "".join(rng.choices("0123456789", k=rng.randint(1, 3)))
        out.append(f"{words.capitalize()}, {number}{rng.choice('.!?')}")
    return out


def build_tiny_model(
    path: str | Path, *, hidden_size: int = 128, layers: int = 2, init_std: float = 0.1, seed: int = 0
) -> Path:
    """Save a tiny tokenizer + ``Qwen2ForCausalLM`` (random weights, tied embeddings) in ``path``; return it.

    ``init_std`` (transformers' default is 0.02) is large enough that a LoRA adapter on the attention and MLP
    projections can make the tied output embedding's logits peaked (with 0.02 the SFT loss barely moves).
    The folder loads with ``AutoTokenizer`` / ``AutoModelForCausalLM.from_pretrained``.
    """
    return build_tiny_qwen2(
        path,
        itertools.chain(_lines(seed, 300), ["<|im_start|>user\nhi<|im_end|>\n"]),
        vocab_size=360,
        hidden_size=hidden_size,
        num_layers=layers,
        max_position_embeddings=256,
        initializer_range=init_std,
        seed=seed,
    )
