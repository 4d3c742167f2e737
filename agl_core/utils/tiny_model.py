"""A tiny Qwen2-style causal LM and ChatML tokenizer built from scratch (no downloads), for offline tests.

The byte-level BPE tokenizer is trained with the pre-tokenizer that transformers' ``Qwen2Tokenizer``
rebuilds when it reloads a ``model_type=qwen2`` folder (NFC, the Qwen2 split regex, then
``ByteLevel(use_regex=False)``), so token ids are the same before and after ``from_pretrained``; with a
plain ByteLevel pre-tokenizer transformers 5.x would split digits differently after the reload. The chat
template marks assistant turns with ``{% generation %}`` so assistant masks (TRL, RL losses) work.

Needs ``torch``, ``transformers`` and ``tokenizers`` (imported only when a model is built); the training
plugins (agl-tinker, agl-unsloth) bring them and build their test models with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = ["CHATML_TEMPLATE", "QWEN2_SPLIT_PATTERN", "SPECIAL_TOKENS", "build_tiny_qwen2"]

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>")
"""The tokenizer's special tokens; ``<|im_end|>`` ends a turn (eos) and ``<|pad|>`` pads."""

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
"""ChatML; each assistant reply (with its ``<|im_end|>``) is wrapped in ``{% generation %}``."""

QWEN2_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
"""The pre-tokenizer split regex of Qwen2's tokenizer."""


def build_tiny_qwen2(
    path: str | Path,
    corpus: Iterable[str],
    *,
    vocab_size: int,
    hidden_size: int,
    num_layers: int,
    max_position_embeddings: int,
    initializer_range: float = 0.02,
    seed: int = 0,
) -> Path:
    """Train a byte-level BPE tokenizer on ``corpus``; save it and a random ``Qwen2ForCausalLM`` in ``path``.

    The model has tied embeddings, 4 attention heads and 2 key-value heads, and an MLP twice
    ``hidden_size`` wide. The folder loads with ``AutoTokenizer`` / ``AutoModelForCausalLM.from_pretrained``
    (config.json, model.safetensors, tokenizer.json, tokenizer_config.json, the chat template). Returns
    ``path`` as a `Path`.
    """
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        corpus,
        trainer=trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=list(SPECIAL_TOKENS),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        unk_token=None,
        additional_special_tokens=["<|endoftext|>", "<|im_start|>"],
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=len(tokenizer),
            hidden_size=hidden_size,
            intermediate_size=2 * hidden_size,
            num_hidden_layers=num_layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=max_position_embeddings,
            tie_word_embeddings=True,
            bos_token_id=None,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            initializer_range=initializer_range,
        )
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
