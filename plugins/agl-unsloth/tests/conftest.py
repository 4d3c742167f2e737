"""Shared fixtures: one tiny model per test session, single-threaded torch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A from-scratch tiny Qwen2 model + ChatML tokenizer folder (no downloads)."""
    import torch

    from agl_unsloth.testing import build_tiny_model

    torch.set_num_threads(1)
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))
