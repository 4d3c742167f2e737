"""The ``agl_register_strategies`` hook: built-in and plugin execution strategies resolve by name."""

from __future__ import annotations

import pytest

import agl_core as agl
from agl_core import hookimpl
from agl_core.errors import UnknownComponentError
from agl_core.execution import (
    ClientServerExecutionStrategy,
    ExecutionStrategy,
    SharedMemoryExecutionStrategy,
)
from agl_core.plugins import PluginManager
from agl_testing import plugin_module


class RecordingStrategy(ExecutionStrategy):
    """Runs the algorithm then one runner bundle inline, and remembers its arguments."""

    def __init__(self, n_runners: int = 1, label: str = "") -> None:
        self.n_runners = n_runners
        self.label = label
        self.executed = False

    def execute(self, algorithm, runner, store) -> None:  # type: ignore[no-untyped-def]
        """Record that the trainer handed this strategy its bundles."""
        self.executed = True


def strategies_plugin(name: str, strategy_name: str):
    @hookimpl
    def agl_register_strategies(registry):
        registry.add(strategy_name, RecordingStrategy, summary="records execute() calls")

    return plugin_module(name, agl_register_strategies=agl_register_strategies)


def test_builtin_strategies_register_through_the_hook(plugin_manager: PluginManager) -> None:
    registry = plugin_manager.registry("strategy")
    assert {"shm", "cs"} <= set(registry.names())
    for name in ("shm", "cs"):
        assert registry.get(name).plugin == "core"
    assert "agl_register_strategies" in plugin_manager.record("core").hooks
    assert isinstance(registry.create("shm"), SharedMemoryExecutionStrategy)
    assert isinstance(registry.create("cs", n_runners=2), ClientServerExecutionStrategy)


def test_trainer_resolves_builtin_names_and_dicts(plugin_manager: PluginManager) -> None:
    assert isinstance(agl.Trainer(strategy="shm", progress=False).strategy, SharedMemoryExecutionStrategy)
    trainer = agl.Trainer(strategy={"type": "cs", "n_runners": 3}, port=0, progress=False)
    assert isinstance(trainer.strategy, ClientServerExecutionStrategy)
    assert trainer.n_runners == 3
    assert trainer.strategy.server_port == 0


def test_plugin_strategy_is_picked_by_name_and_dict(plugin_manager: PluginManager) -> None:
    record = plugin_manager.register(strategies_plugin("recorder", "recording"), name="recorder")
    assert record.status == "ok"
    assert plugin_manager.provides("recorder")[0]["kind"] == "strategy"
    trainer = agl.Trainer(strategy={"type": "recording", "n_runners": 4, "label": "x"}, progress=False)
    assert isinstance(trainer.strategy, RecordingStrategy)
    assert trainer.strategy.label == "x"
    assert trainer.n_runners == 4

    @agl.rollout
    def agent(task: int) -> float:
        return 1.0

    trainer.fit(agent, [1])
    assert trainer.strategy.executed


def test_plugin_cannot_take_a_builtin_strategy_name(plugin_manager: PluginManager) -> None:
    record = plugin_manager.register(strategies_plugin("thief", "cs"), name="thief", distribution="agl-thief")
    assert record.status == "failed"
    assert record.error is not None and record.error.stage == "agl_register_strategies"
    assert "agl-thief" in record.error.message and "agl-core" in record.error.message
    assert plugin_manager.registry("strategy").get("cs").plugin == "core"


def test_misspelt_strategies_hook_gets_a_suggestion(plugin_manager: PluginManager) -> None:
    def agl_register_strategys(registry):
        registry.add("typo", RecordingStrategy)

    record = plugin_manager.register(
        plugin_module("typo", agl_register_strategys=agl_register_strategys), name="typo"
    )
    assert record.status == "failed"
    assert "agl_register_strategies" in record.error.message  # type: ignore[union-attr]


def test_missing_ray_plugin_names_the_distribution(plugin_manager: PluginManager) -> None:
    if "ray" in plugin_manager.registry("strategy"):
        pytest.skip("agl-ray is registered in this manager")
    with pytest.raises(UnknownComponentError, match="agl-ray") as info:
        agl.Trainer(strategy="ray", progress=False)
    assert "Registered strategies: cs, shm" in str(info.value)


@agl.rollout
def cli_agent(task: int) -> float:
    """An agent `agl runner` can import in the CLI tests."""
    return 1.0


def test_agl_runner_rejects_a_strategy_that_cannot_place_runners(plugin_manager: PluginManager) -> None:
    from click.testing import CliRunner

    from agl_core.cli.runner_cmd import runner_command

    args = ["--store", "http://127.0.0.1:9", "--agent", "tests.plugins.test_strategies_hook:cli_agent"]
    result = CliRunner().invoke(runner_command, [*args, "--strategy", "shm"])
    assert result.exit_code == 2
    assert "Strategy 'shm' cannot place runners on its own" in result.output
    result = CliRunner().invoke(runner_command, [*args, "--address", "auto"])
    assert result.exit_code == 2
    assert "--address only applies to a cluster strategy" in result.output
    result = CliRunner().invoke(runner_command, [*args, "--strategy", "nope"])
    assert result.exit_code == 2
    assert "Unknown strategy 'nope'" in result.output
