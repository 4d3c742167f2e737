"""Shared setup of the CPU tests (``make test-verl``): the model folder and the child-process environment."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DEFAULT_MODEL = REPO / ".agl" / "models" / "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """SmolLM2-135M-Instruct as safetensors (``make verl-cpu-model``; ``AGL_VERL_CPU_MODEL`` overrides)."""
    folder = Path(os.environ.get("AGL_VERL_CPU_MODEL", DEFAULT_MODEL))
    if not (folder / "config.json").is_file():
        pytest.fail(f"no model at {folder}: run `make verl-cpu-model` (or set AGL_VERL_CPU_MODEL).")
    return folder


@pytest.fixture(scope="module")
def child_env() -> Iterator[dict[str, str]]:
    """Environment of a child that starts Ray or vLLM: one thread per op, Ray in a short tmp dir.

    ``AGL_VERL_DEVICE=cuda`` (``gpu_check.sh``) leaves vLLM to pick its CUDA build.
    """
    with tempfile.TemporaryDirectory(prefix="aglray-", dir="/tmp") as ray_tmp:
        env = dict(os.environ)
        env |= {
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "RAY_TMPDIR": ray_tmp,
            "RAY_AUTH_MODE": "disabled",
            "RAY_USAGE_STATS_ENABLED": "0",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "WANDB_MODE": "disabled",
        }
        if os.environ.get("AGL_VERL_DEVICE", "cpu") == "cpu":  # gpu_check.sh sets cuda
            env |= {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1"}
        yield env
