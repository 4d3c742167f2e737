"""The LitAgent base class: rollout method defaults, async detection, weak references, pickling."""

from __future__ import annotations

import gc
import pickle
from typing import Any

import pytest

from agl_core.litagent import LitAgent
from agl_core.types import NamedResources, Rollout


class SyncAgent(LitAgent[str]):
    def rollout(self, task: str, resources: NamedResources, rollout: Rollout) -> float:
        return float(len(task))


class AsyncAgent(LitAgent[str]):
    async def rollout_async(self, task: str, resources: NamedResources, rollout: Rollout) -> float:
        return 2.0


class TrainOnlyAsync(LitAgent[str]):
    async def training_rollout_async(self, task: str, resources: NamedResources, rollout: Rollout) -> float:
        return 3.0


class Owner:
    """Something with a tracer, standing for a runner or trainer."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer


def _rollout() -> Rollout:
    return Rollout(rollout_id="ro-1", input="abc", start_time=0.0)


def test_trained_agents_is_deprecated() -> None:
    with pytest.warns(DeprecationWarning, match="trained_agents"):
        agent = SyncAgent(trained_agents="writer")
    assert agent.trained_agents == "writer"


def test_no_deprecation_warning_by_default(recwarn: pytest.WarningsRecorder) -> None:
    SyncAgent()
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]


def test_is_async_follows_overridden_methods() -> None:
    assert not SyncAgent().is_async()
    assert AsyncAgent().is_async()
    assert TrainOnlyAsync().is_async()


def test_training_and_validation_default_to_rollout() -> None:
    agent = SyncAgent()
    assert agent.training_rollout("abcd", {}, _rollout()) == 4.0
    assert agent.validation_rollout("ab", {}, _rollout()) == 2.0


async def test_async_training_and_validation_default_to_rollout_async() -> None:
    agent = AsyncAgent()
    assert await agent.training_rollout_async("x", {}, _rollout()) == 2.0
    assert await agent.validation_rollout_async("x", {}, _rollout()) == 2.0


async def test_base_rollout_methods_are_not_implemented() -> None:
    agent = LitAgent[str]()
    with pytest.raises(NotImplementedError, match="rollout"):
        agent.rollout("x", {}, _rollout())
    with pytest.raises(NotImplementedError, match="rollout_async"):
        await agent.rollout_async("x", {}, _rollout())


def test_runner_and_trainer_are_weak_references() -> None:
    agent = SyncAgent()
    with pytest.raises(ValueError, match="set_runner"):
        agent.get_runner()
    with pytest.raises(ValueError, match="set_trainer"):
        agent.get_trainer()
    runner = Owner(tracer="runner-tracer")
    trainer = Owner(tracer="trainer-tracer")
    agent.set_runner(runner)
    agent.set_trainer(trainer)
    assert agent.runner is runner
    assert agent.trainer is trainer
    del runner, trainer
    gc.collect()
    with pytest.raises(ValueError, match="garbage-collected"):
        agent.get_runner()
    with pytest.raises(ValueError, match="garbage-collected"):
        agent.get_trainer()


def test_tracer_comes_from_runner_then_trainer() -> None:
    agent = SyncAgent()
    with pytest.raises(ValueError, match="no tracer"):
        agent.get_tracer()
    trainer = Owner(tracer="trainer-tracer")
    agent.set_trainer(trainer)
    assert agent.tracer == "trainer-tracer"
    runner = Owner(tracer="runner-tracer")
    agent.set_runner(runner)
    assert agent.tracer == "runner-tracer"


def test_pickling_drops_process_local_references() -> None:
    agent = SyncAgent()
    runner = Owner(tracer="t")
    agent.set_runner(runner)
    copy = pickle.loads(pickle.dumps(agent))
    assert copy.rollout("abc", {}, _rollout()) == 3.0
    with pytest.raises(ValueError, match="set_runner"):
        copy.get_runner()
