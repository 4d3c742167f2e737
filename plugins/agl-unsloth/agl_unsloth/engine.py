"""LoRA fine-tuning engines: TRL + peft on CPU (or GPU), unsloth's FastLanguageModel in a spawned process.

Both train with TRL's ``SFTTrainer`` and ``assistant_only_loss=True``: the chat template's
``{% generation %}`` marks the assistant turns, every other token gets label -100. Each run saves the LoRA
adapter and the merged weights (plus the tokenizer) so the merged folder is a complete model.
"""

from __future__ import annotations

import importlib.util
import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["Engine", "TrainConfig", "build_trl_trainer", "resolve_engine", "train"]

logger = logging.getLogger("agl_core.algorithm.unsloth")

Engine = Literal["auto", "unsloth", "trl"]


@dataclass
class TrainConfig:
    """LoRA and optimisation settings of one fine-tuning run."""

    lora_rank: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    learning_rate: float = 2e-4
    epochs: float = 1.0
    max_steps: int = -1
    batch_size: int = 4
    gradient_accumulation_steps: int = 1
    max_length: int = 1024
    seed: int = 0
    load_in_4bit: bool = False
    timeout_s: float = 3600.0


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def resolve_engine(engine: str) -> Literal["unsloth", "trl"]:
    """``auto`` -> unsloth with CUDA and unsloth installed, else trl; ``unsloth`` is checked up front.

    Raises:
        ValueError: an unknown engine name.
        RuntimeError: ``unsloth`` requested without a CUDA GPU.
        ImportError: ``unsloth`` requested but not installed.
    """
    if engine not in ("auto", "unsloth", "trl"):
        raise ValueError(f"engine must be 'auto', 'unsloth' or 'trl', not {engine!r}.")
    if engine == "trl":
        return "trl"
    has_unsloth = importlib.util.find_spec("unsloth") is not None
    if engine == "auto":
        return "unsloth" if has_unsloth and _cuda() else "trl"
    if not _cuda():
        raise RuntimeError(
            "engine='unsloth' needs a CUDA GPU, and torch sees none. Use engine='trl' (or 'auto') on CPU."
        )
    if not has_unsloth:
        raise ImportError("engine='unsloth' needs unsloth: pip install 'agl-unsloth[gpu]'.")
    return "unsloth"


def _sft_config(out_dir: Path, cfg: TrainConfig, *, use_cpu: bool) -> Any:
    from trl import SFTConfig

    # TRL turns on bf16 mixed precision by default; on a CPU without native bf16 matmuls every step then
    # runs ~9x slower (SmolLM2-135M, 8 x ~115 tokens: 114 CPU-s a step against 13 in float32), so CPU
    # training stays in float32. On GPUs TRL's default is kept.
    precision: dict[str, Any] = {"bf16": False, "fp16": False} if use_cpu else {}
    return SFTConfig(
        output_dir=str(out_dir / "trainer"),
        assistant_only_loss=True,
        use_cpu=use_cpu,
        **precision,
        num_train_epochs=cfg.epochs,
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        max_length=cfg.max_length,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=cfg.seed,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )


def build_trl_trainer(
    model_dir: str | Path, rows: list[dict[str, Any]], out_dir: str | Path, cfg: TrainConfig
) -> Any:
    """An untrained TRL ``SFTTrainer`` with a fresh LoRA adapter on ``model_dir`` over chat ``rows``."""
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTTrainer

    cuda = _cuda()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    lora = LoraConfig(
        r=cfg.lora_rank,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=cfg.target_modules,
        task_type="CAUSAL_LM",
    )
    return SFTTrainer(
        model=model,
        args=_sft_config(Path(out_dir), cfg, use_cpu=not cuda),
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=lora,
    )


def _losses(trainer: Any) -> list[float]:
    return [float(h["loss"]) for h in trainer.state.log_history if "loss" in h]


def _train_trl(model_dir: str, rows: list[dict[str, Any]], out_dir: str, cfg: TrainConfig) -> dict[str, Any]:
    out = Path(out_dir)
    trainer = build_trl_trainer(model_dir, rows, out, cfg)
    trainer.train()
    trainer.model.save_pretrained(out / "adapter")
    merged = trainer.model.merge_and_unload()
    merged.save_pretrained(out / "merged")
    trainer.processing_class.save_pretrained(out / "merged")
    return {
        "losses": _losses(trainer),
        "adapter_dir": str(out / "adapter"),
        "merged_dir": str(out / "merged"),
    }


def _train_unsloth(
    model_dir: str, rows: list[dict[str, Any]], out_dir: str, cfg_dict: dict[str, Any]
) -> dict[str, Any]:
    """Runs in a spawned process: unsloth is imported first there, and its global patches die with it."""
    import unsloth  # noqa: F401  (must come before trl/transformers/peft)
    from datasets import Dataset
    from trl import SFTTrainer
    from unsloth import FastLanguageModel

    cfg = TrainConfig(**cfg_dict)
    out = Path(out_dir)
    model, tokenizer = FastLanguageModel.from_pretrained(
        model_name=model_dir, max_seq_length=cfg.max_length, load_in_4bit=cfg.load_in_4bit
    )
    model = FastLanguageModel.get_peft_model(
        model,
        r=cfg.lora_rank,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=cfg.target_modules,
        random_state=cfg.seed,
    )
    trainer = SFTTrainer(
        model=model,
        args=_sft_config(out, cfg, use_cpu=False),
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
    )
    trainer.train()
    model.save_pretrained(out / "adapter")
    model.save_pretrained_merged(str(out / "merged"), tokenizer, save_method="merged_16bit")
    return {
        "losses": _losses(trainer),
        "adapter_dir": str(out / "adapter"),
        "merged_dir": str(out / "merged"),
    }


def train(
    engine: Literal["unsloth", "trl"],
    model_dir: str | Path,
    rows: list[dict[str, Any]],
    out_dir: str | Path,
    cfg: TrainConfig,
) -> dict[str, Any]:
    """Fine-tune a LoRA adapter on ``rows``; returns ``{"losses", "adapter_dir", "merged_dir"}``.

    ``trl`` runs in this process (call it from a worker thread to keep an event loop free); ``unsloth``
    runs in a spawned process and is given ``cfg.timeout_s`` seconds.
    """
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    logger.info("agl-unsloth: fine-tuning with engine=%s on %d conversations", engine, len(rows))
    if engine == "trl":
        return _train_trl(str(model_dir), rows, str(out_dir), cfg)
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        future = pool.submit(_train_unsloth, str(model_dir), rows, str(out_dir), asdict(cfg))
        return future.result(timeout=cfg.timeout_s)
