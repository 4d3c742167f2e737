"""Bad configuration fails fast, with a message naming the fix, before anything reaches the store."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from agl_apo import APO, APOConfigError, OptimizerUnreachableError
from agl_core.store import LightningStore
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import LLM

from .harness import fake_models, initial_resources, make_apo, run_apo
from .scripted import TASK_MODEL, make_tasks

TRAIN = make_tasks(6)
VAL = make_tasks(3, offset=1)


async def _assert_untouched(store: LightningStore) -> None:
    stats = await store.statistics()
    assert stats["total_rollouts"] == 0
    assert stats["total_resources"] == 0


@pytest.mark.parametrize(
    "setting",
    ["beam_width", "branch_factor", "beam_rounds", "gradient_batch_size", "val_batch_size"],
)
@pytest.mark.parametrize("value", [0, -1, 2.5])
def test_non_positive_sizes_are_rejected(setting: str, value: Any) -> None:
    with pytest.raises(APOConfigError, match=f"{setting} must be a positive integer"):
        APO(base_url="http://127.0.0.1:1/v1", **{setting: value})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rollout_batch_timeout": 0}, "rollout_batch_timeout must be a positive number"),
        ({"diversity_temperature": 3.0}, "diversity_temperature must be between 0 and 2"),
        ({"run_id": "bad/id"}, "run_id must be"),
        ({"resume": True}, "resume=True needs the run_id"),
        ({"gradient_model": " "}, "gradient_model must be a model name"),
    ],
)
def test_other_bad_settings_are_rejected(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(APOConfigError, match=message):
        APO(base_url="http://127.0.0.1:1/v1", **kwargs)


async def test_beam_width_zero_through_the_trainer_registry() -> None:
    from agl_core.plugins import PluginManager
    from agl_core.trainer import Trainer
    from agl_testing import use_plugin_manager

    manager = PluginManager(strict=True)
    manager.load_entrypoints()
    store = InMemoryLightningStore()
    with (
        use_plugin_manager(manager),
        pytest.raises(APOConfigError, match="beam_width must be a positive integer"),
    ):
        Trainer(
            algorithm={"type": "apo", "beam_width": 0, "base_url": "http://127.0.0.1:1/v1"},
            store=store,
            progress=False,
        )
    await _assert_untouched(store)


async def test_missing_prompt_template(tmp_path: Path) -> None:
    store = InMemoryLightningStore()
    async with fake_models() as (server, _):
        apo = make_apo(server, output_dir=tmp_path)
        resources = {"llm": LLM(endpoint=server.base_url, model=TASK_MODEL)}
        with pytest.raises(APOConfigError, match=r"No prompt template resource found.*'llm' \(LLM\)"):
            await run_apo(apo, store, resources, TRAIN, VAL)
        assert server.requests == []  # not even the endpoint check
    await _assert_untouched(store)


async def test_missing_initial_resources(tmp_path: Path) -> None:
    store = InMemoryLightningStore()
    async with fake_models() as (server, _):
        apo = make_apo(server, output_dir=tmp_path)
        with pytest.raises(APOConfigError, match="initial_resources are not set"):
            await run_apo(apo, store, {}, TRAIN, VAL)
    await _assert_untouched(store)


@pytest.mark.parametrize(
    ("train", "val", "message"),
    [
        (None, VAL, "train_dataset is required"),
        (TRAIN, None, "val_dataset is required"),
        (TRAIN, [], "val_dataset is empty"),
        (42, VAL, "train_dataset must support len"),
    ],
)
async def test_missing_datasets(tmp_path: Path, train: Any, val: Any, message: str) -> None:
    store = InMemoryLightningStore()
    async with fake_models() as (server, _):
        apo = make_apo(server, output_dir=tmp_path)
        with pytest.raises(APOConfigError, match=message):
            await run_apo(apo, store, initial_resources(server), train, val)
    await _assert_untouched(store)


async def test_unreachable_optimizer_endpoint(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = InMemoryLightningStore()
    async with fake_models() as (server, _):
        apo = make_apo(
            server, output_dir=tmp_path, base_url=f"http://127.0.0.1:{port}/v1", preflight_timeout=3.0
        )
        with pytest.raises(OptimizerUnreachableError, match=f"127.0.0.1:{port}/v1 is unreachable"):
            await run_apo(apo, store, initial_resources(server), TRAIN, VAL)
    await _assert_untouched(store)
    assert not (tmp_path / "best_prompt.txt").exists()


async def test_existing_run_is_not_overwritten(tmp_path: Path) -> None:
    store = InMemoryLightningStore()
    async with fake_models() as (server, _):
        first = make_apo(server, run_id="same", output_dir=tmp_path, beam_rounds=1)
        await run_apo(first, store, initial_resources(server), TRAIN, VAL)
        before = await store.statistics()
        again = make_apo(server, run_id="same", output_dir=tmp_path)
        with pytest.raises(APOConfigError, match=r"already holds APO run 'same'.*resume=True"):
            await run_apo(again, store, initial_resources(server), TRAIN, VAL)
        other_seed = make_apo(server, run_id="same", output_dir=tmp_path, resume=True)
        with pytest.raises(APOConfigError, match="different seed template"):
            await run_apo(other_seed, store, initial_resources(server, "Say <{word}> loudly."), TRAIN, VAL)
    after = await store.statistics()
    assert (after["total_rollouts"], after["total_resources"]) == (
        before["total_rollouts"],
        before["total_resources"],
    )
