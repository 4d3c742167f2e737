"""The CPU engine (transformers + peft + TRL): only assistant tokens are labelled, the loss goes down,
and the adapter and merged weights are saved as loadable folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from agl_unsloth.engine import TrainConfig, build_trl_trainer, train

ROWS = [
    {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": f"Say the number {n}."},
            {"role": "assistant", "content": f"{n}{n}{n}"},
        ]
    }
    for n in range(8)
]


def test_only_assistant_tokens_are_in_the_loss(tiny_model: Path, tmp_path: Path) -> None:
    trainer = build_trl_trainer(tiny_model, ROWS[:1], tmp_path, TrainConfig())
    example = trainer.train_dataset[0]
    batch = trainer.data_collator([example])
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    tok = trainer.processing_class
    supervised = [i for i, lab in zip(ids, labels, strict=True) if lab != -100]
    assert tok.decode(supervised) == "000<|im_end|>"
    # Everything up to and including the assistant header (system, user, role markers) is masked.
    header = tok.apply_chat_template(ROWS[0]["messages"][:2], tokenize=False, add_generation_prompt=True)
    n_prompt = len(tok(header)["input_ids"])
    assert set(labels[:n_prompt]) == {-100}
    assert ids[:n_prompt] == tok(header)["input_ids"]
    assert labels[n_prompt : n_prompt + len(supervised)] == supervised


def test_cpu_training_runs_in_float32(tiny_model: Path, tmp_path: Path) -> None:
    # bf16 mixed precision (TRL's default) is emulated on most CPUs and made SFT steps ~9x slower.
    trainer = build_trl_trainer(tiny_model, ROWS[:1], tmp_path, TrainConfig())
    assert not trainer.args.bf16 and not trainer.args.fp16
    assert trainer.accelerator.mixed_precision == "no"


@pytest.mark.slow
def test_sft_loss_decreases_and_weights_are_saved(tiny_model: Path, tmp_path: Path) -> None:
    cfg = TrainConfig(learning_rate=5e-3, epochs=10, batch_size=4, lora_rank=8)
    result = train("trl", tiny_model, ROWS, tmp_path / "out", cfg)
    losses = result["losses"]
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    print(f"SFT loss over {len(losses)} steps: first-3 mean {first:.3f}, last-3 mean {last:.3f}")
    assert len(losses) == 20
    assert last < 0.5 * first, losses
    assert (Path(result["adapter_dir"]) / "adapter_config.json").is_file()
    merged = Path(result["merged_dir"])
    assert (merged / "config.json").is_file() and (merged / "tokenizer.json").is_file()

    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(merged)
    assert not any("lora" in name for name, _ in model.named_parameters())
