"""Build a tiny Qwen2-style causal LM and a ChatML tokenizer locally (no downloads) for tests and smoke runs.

The byte-level BPE tokenizer is trained with the pre-tokenizer that transformers 5.x's ``Qwen2Tokenizer``
rebuilds when it reloads a ``model_type=qwen2`` folder (NFC, the Qwen2 split regex, then
``ByteLevel(use_regex=False)``), so token ids are the same before and after ``from_pretrained``. The chat
template marks assistant turns with ``{% generation %}`` so TRL can mask everything else out of the loss.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

__all__ = ["CHAT_TEMPLATE", "build_tiny_model"]

#: ChatML with ``{% generation %}`` around each assistant reply (and its ``<|im_end|>``).
CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' }}{% generation %}{{ m['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{{ '\\n' }}"
    "{% else %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
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
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        itertools.chain(_lines(seed, 300), ["<|im_start|>user\nhi<|im_end|>\n"]),
        trainer=trainers.BpeTrainer(
            vocab_size=360,
            special_tokens=_SPECIALS,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        additional_special_tokens=["<|endoftext|>", "<|im_start|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=len(tokenizer),
            hidden_size=hidden_size,
            intermediate_size=2 * hidden_size,
            num_hidden_layers=layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=256,
            tie_word_embeddings=True,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=None,
            initializer_range=init_std,
        )
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
