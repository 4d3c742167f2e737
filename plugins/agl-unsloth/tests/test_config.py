"""Bad configuration fails fast with a message naming the problem and the fix; selection rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from agl_core.store.memory import InMemoryLightningStore
from agl_unsloth.algorithm import SFT
from agl_unsloth.data import NoRolloutsKeptError, ScoredRollout, select_best
from agl_unsloth.engine import resolve_engine

from .harness import TASKS, failing_agent, running_runners


def test_a_missing_model_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not a local model folder"):
        SFT(model_name=tmp_path / "nope")


def test_unsloth_without_a_gpu_fails_at_construction(tiny_model: Path) -> None:
    with pytest.raises(RuntimeError, match=r"needs a CUDA GPU.*engine='trl'"):
        SFT(model_name=tiny_model, engine="unsloth")


def test_engine_choice_on_cpu() -> None:
    assert resolve_engine("auto") == "trl"
    assert resolve_engine("trl") == "trl"
    with pytest.raises(ValueError, match="engine must be"):
        resolve_engine("deepspeed")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"top_k": 0}, "top_k"),
        ({"keep_fraction": 0.0}, "keep_fraction"),
        ({"n_iterations": 0}, "n_iterations"),
    ],
)
def test_invalid_settings_are_rejected(tiny_model: Path, kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SFT(model_name=tiny_model, **kwargs)  # type: ignore[arg-type]


def _scored(rewards: list[float | None]) -> list[ScoredRollout]:
    sample = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    return [ScoredRollout(f"ro-{i}", r, "succeeded", [sample]) for i, r in enumerate(rewards)]


def test_selection_by_top_k_fraction_and_threshold() -> None:
    rollouts = [*_scored([0.1, 0.9, None, 0.5, 0.7]), ScoredRollout("ro-x", 1.0, "failed", [])]
    assert [r.rollout_id for r in select_best(rollouts, top_k=2)] == ["ro-1", "ro-4"]
    assert [r.rollout_id for r in select_best(rollouts, keep_fraction=0.5)] == ["ro-1", "ro-4"]
    assert [r.rollout_id for r in select_best(rollouts, reward_threshold=0.5)] == ["ro-1"]
    both = select_best(rollouts, top_k=3, reward_threshold=0.5)
    assert [r.rollout_id for r in both] == ["ro-1", "ro-4", "ro-3"]


async def test_no_rollouts_kept_fails_with_the_best_reward_and_the_threshold(
    tiny_model: Path, tmp_path: Path
) -> None:
    algo = SFT(
        model_name=tiny_model, reward_threshold=0.5, rollouts_per_task=1, run_dir=tmp_path, progress=False
    )
    store = InMemoryLightningStore()
    algo.set_store(store)
    async with running_runners(store, failing_agent):
        with pytest.raises(NoRolloutsKeptError, match=r"best reward 0.0, reward_threshold=0.5"):
            await algo.run(TASKS)
    assert not (tmp_path / "iter-001").exists()
