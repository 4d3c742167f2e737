"""Driver of gpu_smoke.sh: tiny model, toy "answer with a digit" task, 3 GRPO steps, reward per step."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

DIGITS = "0123456789"


def build_tiny_model(folder: Path) -> str:
    """A 4-layer Qwen2 with a ChatML byte-level BPE tokenizer trained on a few KB of local text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = [
        f"<|im_start|>user\nSay digit {d}<|im_end|>\n<|im_start|>assistant\n{d}<|im_end|>" for d in DIGITS
    ] * 50
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=400, special_tokens=specials))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|pad|>", bos_token="<|endoftext|>"
    )
    fast.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    config = Qwen2Config(
        vocab_size=len(fast),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        bos_token_id=fast.bos_token_id,
    )
    Qwen2ForCausalLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return str(folder)


def agent(task: dict[str, Any], llm: Any) -> float:
    """Ask for a digit; reward 1 when the answer contains the requested one."""
    body = {
        "model": llm.model,
        "messages": [{"role": "user", "content": f"Say digit {task['digit']}"}],
        "max_tokens": 8,
        **llm.sampling_parameters,
    }
    request = urllib.request.Request(
        llm.endpoint.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        answer = json.load(response)["choices"][0]["message"]["content"] or ""
    return 1.0 if task["digit"] in answer else 0.0


def main(work: Path) -> None:
    from agl_core.litagent import llm_rollout
    from agl_core.trainer import Trainer
    from agl_verl import VERL, VerlConfig

    model = build_tiny_model(work / "tiny")
    config = VerlConfig(
        model_path=model,
        rollout_n=4,
        train_batch_size=4,
        ppo_mini_batch_size=4,
        ppo_micro_batch_size_per_gpu=4,
        max_prompt_length=64,
        max_response_length=16,
        lr=1e-5,
        total_training_steps=3,
        val_before_train=False,
        rollout_timeout_s=120,
        batch_timeout_s=180,
        gpu_memory_utilization=0.3,
        logger=["console"],
        default_local_dir=str(work / "ckpt"),
        verl_overrides={
            "actor_rollout_ref.model.use_remove_padding": False,
            "trainer.resume_mode": "disable",
        },
    )
    tasks = [{"digit": d} for d in DIGITS[:8]]
    trainer = Trainer(algorithm=VERL(config), n_runners=8)
    trainer.fit(llm_rollout(agent), tasks)  # console logger prints agl/reward for every step


if __name__ == "__main__":
    main(Path(sys.argv[1]))
