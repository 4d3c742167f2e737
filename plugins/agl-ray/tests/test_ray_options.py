"""Options of the ray strategy: resources mapping and clear errors for bad input (no Ray needed)."""

from __future__ import annotations

import pytest

import agl_core as agl
from agl_ray.strategy import RayExecutionStrategy, actor_options


def test_resources_map_to_ray_actor_options() -> None:
    assert actor_options(None) == {"num_cpus": 1}
    assert actor_options({"CPU": 2, "GPU": 0.5, "memory": 1e9, "sandbox": 1}) == {
        "num_cpus": 2,
        "num_gpus": 0.5,
        "memory": 1e9,
        "resources": {"sandbox": 1},
    }
    assert actor_options({"num_cpus": 0.25}) == {"num_cpus": 0.25}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"runner_resources": {"GPU": -1}}, r"runner_resources\['GPU'\] must be a number >= 0"),
        ({"runner_resources": {"CPU": "one"}}, r"runner_resources\['CPU'\] must be a number >= 0"),
        ({"n_runners": 0}, "n_runners must be an integer >= 1"),
        ({"role": "runner"}, "role='runner' needs store_uri"),
        ({"role": "algorithm"}, "role must be 'both' or 'runner'"),
        ({"store_uri": "memory:"}, "would give every actor its own empty store"),
        ({"max_restarts": -1}, "max_restarts must be an integer >= 0"),
        ({"connect_timeout": 0}, "must be > 0 seconds"),
    ],
)
def test_bad_options_say_what_to_fix(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RayExecutionStrategy(**kwargs)


def test_trainer_builds_the_plugin_strategy_by_name_with_its_runner_count() -> None:
    trainer = agl.Trainer(strategy="ray", n_runners=3, progress=False)
    assert isinstance(trainer.strategy, RayExecutionStrategy)
    assert trainer.strategy.n_runners == 3
    spec = {"type": "ray", "n_runners": 5, "address": "auto", "runner_resources": {"GPU": 1}}
    trainer = agl.Trainer(strategy=spec, progress=False)
    assert trainer.n_runners == 5
    assert trainer.strategy.address == "auto"  # type: ignore[attr-defined]


def test_scale_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match="scale\\(\\) needs an integer >= 0"):
        RayExecutionStrategy().scale(-1)
