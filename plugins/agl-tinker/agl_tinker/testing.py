"""A tiny Qwen2-style model and ChatML tokenizer built from scratch (no downloads), for offline tests.

:func:`build_tiny_model` trains a byte-level BPE tokenizer on a small generated corpus with the same
pre-tokenizer pipeline transformers' ``Qwen2Tokenizer`` rebuilds on reload (NFC + the Qwen2 split regex +
``ByteLevel(use_regex=False)``), so the ids are identical after ``AutoTokenizer.from_pretrained``; with a
plain ByteLevel pre-tokenizer transformers 5.x would split digits differently after the reload.
"""

from __future__ import annotations

import random
from pathlib import Path

__all__ = ["CHATML_TEMPLATE", "SPECIAL_TOKENS", "build_tiny_model"]

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>")

#: ChatML; assistant turns are marked with ``{% generation %}`` so assistant masks work.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' }}{% generation %}{{ message['content'] + '<|im_end|>' }}"
    "{% endgeneration %}{{ '\\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

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
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(seed, 400), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        unk_token=None,
        additional_special_tokens=["<|endoftext|>", "<|im_start|>"],
    )
    fast.chat_template = CHATML_TEMPLATE
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(fast),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(out)
    fast.save_pretrained(out)
    return out
