"""`Trainer(...)`: defaults, deprecated aliases, component specs and strategy resolution."""

from __future__ import annotations

from pathlib import Path

import pytest

import agl_core as agl
from agl_core.adapter import TracerTraceToTriplet
from agl_core.errors import UnknownComponentError
from agl_core.plugins import PluginManager
from agl_core.store.memory import InMemoryLightningStore
from agl_core.store.sqlite import SqliteLightningStore


def test_defaults(plugin_manager: PluginManager) -> None:
    trainer = agl.Trainer()
    assert isinstance(trainer.strategy, agl.ClientServerExecutionStrategy)
    assert (trainer.strategy.n_runners, trainer.strategy.server_port) == (1, 4747)
    assert isinstance(trainer.tracer, agl.OtelTracer)
    assert type(trainer.adapter) is TracerTraceToTriplet
    assert isinstance(trainer.store, InMemoryLightningStore)
    assert isinstance(trainer.runner, agl.LitAgentRunner) and trainer.runner.tracer is trainer.tracer
    assert trainer.runner.poll_interval == 0.25
    assert trainer.algorithm is None and trainer.llm_proxy is None
    assert (trainer.n_runners, trainer.max_rollouts, trainer.hooks) == (1, None, ())


def test_deprecated_aliases_warn_and_lose_to_the_new_names(plugin_manager: PluginManager) -> None:
    with pytest.warns(DeprecationWarning, match="n_workers"):
        assert agl.Trainer(n_workers=3, strategy="shm").n_runners == 3
    with pytest.warns(UserWarning, match="ignoring n_workers"), pytest.warns(DeprecationWarning):
        assert agl.Trainer(n_workers=3, n_runners=2, strategy="shm").n_runners == 2
    with pytest.warns(DeprecationWarning, match="max_tasks"):
        trainer = agl.Trainer(max_tasks=5)
    assert trainer.max_rollouts == 5 and trainer.runner.max_rollouts == 5  # type: ignore[attr-defined]
    adapter = TracerTraceToTriplet(agent_match="x")
    with pytest.warns(DeprecationWarning, match="triplet_exporter"):
        assert agl.Trainer(triplet_exporter=adapter).adapter is adapter
    with pytest.warns(DeprecationWarning, match=r"trainer\.dev"):
        agl.Trainer(dev=True)


def test_strategy_names_dicts_and_instances(plugin_manager: PluginManager) -> None:
    shm = agl.Trainer(strategy="shm", n_runners=3).strategy
    assert isinstance(shm, agl.SharedMemoryExecutionStrategy)
    assert (shm.n_runners, shm.main_thread) == (3, "algorithm")
    cs = agl.Trainer(strategy={"type": "cs", "graceful_timeout": 2.0}, port=0).strategy
    assert isinstance(cs, agl.ClientServerExecutionStrategy)
    assert (cs.graceful_timeout, cs.server_port) == (2.0, 0)


def test_a_strategy_instance_sets_n_runners_and_gets_the_port(plugin_manager: PluginManager) -> None:
    strategy = agl.ClientServerExecutionStrategy(n_runners=5, server_port=1234)
    trainer = agl.Trainer(strategy=strategy, n_runners=2, port=4321)
    assert trainer.strategy is strategy
    assert trainer.n_runners == 5 and strategy.server_port == 4321
    shm = agl.Trainer(strategy="shm", port=4321).strategy
    assert not hasattr(shm, "server_port")


def test_component_specs(plugin_manager: PluginManager, tmp_path: Path) -> None:
    trainer = agl.Trainer(
        tracer="dummy",
        adapter={"agent_match": "planner"},
        store=f"sqlite:///{tmp_path / 'run.db'}",
        runner={"type": "litagent", "poll_interval": 0.5},
        algorithm="baseline",
        max_rollouts=7,
    )
    assert type(trainer.tracer) is agl.DummyTracer
    assert type(trainer.adapter) is TracerTraceToTriplet and trainer.adapter.agent_match == "planner"
    assert isinstance(trainer.store, SqliteLightningStore)
    runner = trainer.runner
    assert isinstance(runner, agl.LitAgentRunner)
    assert (runner.tracer, runner.max_rollouts, runner.poll_interval) == (trainer.tracer, 7, 0.5)
    by_name = agl.Trainer(runner="litagent").runner
    assert isinstance(by_name, agl.LitAgentRunner) and by_name.poll_interval == 0.25
    assert isinstance(trainer.algorithm, agl.Baseline)


def test_bad_specs_are_clear_errors(plugin_manager: PluginManager) -> None:
    with pytest.raises(ValueError, match="tracer dict must have a 'type' key"):
        agl.Trainer(tracer={"flush_timeout": 3})
    with pytest.raises(ValueError, match="n_runners must be an integer >= 0"):
        agl.Trainer(n_runners=-1)
    with pytest.raises(TypeError, match=r"hooks must be agl\.Hook instances"):
        agl.Trainer(hooks=[object()])  # type: ignore[list-item]
    with pytest.raises(UnknownComponentError, match="pip install agl-apo"):
        agl.Trainer(algorithm="apo")


def test_hooks_are_normalized_to_a_tuple(plugin_manager: PluginManager) -> None:
    hook = agl.Hook()
    assert agl.Trainer(hooks=hook).hooks == (hook,)
    assert agl.Trainer(hooks=[hook, hook]).hooks == (hook, hook)


def test_dev_with_a_string_dataset_points_to_fit_v0(plugin_manager: PluginManager) -> None:
    trainer = agl.Trainer(strategy="shm", progress=False)
    with pytest.raises(TypeError, match=r"Trainer\.fit_v0"):
        trainer.dev(agl.rollout(lambda task: 1.0), "http://localhost:8000")  # type: ignore[arg-type]


def test_dev_requires_a_fast_algorithm(plugin_manager: PluginManager) -> None:
    class Slow(agl.Algorithm):
        def run(self, train_dataset: object = None, val_dataset: object = None) -> None:
            raise AssertionError("must not run")

    trainer = agl.Trainer(strategy="shm", algorithm=Slow(), progress=False)
    with pytest.raises(
        TypeError, match=r"Trainer\.dev\(\) requires an algorithm that inherits from FastAlgorithm"
    ):
        trainer.dev(agl.rollout(lambda task: 1.0), [1])
