"""The Algorithm base: injection slots, weak references, sync/async run and pickling."""

from __future__ import annotations

import gc
import pickle
from typing import Any

import pytest

from agl_core.algorithm import Algorithm, FastAlgorithm
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import PromptTemplate


class Component:
    """Something weak-referenceable standing for a trainer, an adapter or a proxy."""


class SyncAlgorithm(Algorithm):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        self.seen.append((train_dataset, val_dataset))


class AsyncAlgorithm(Algorithm):
    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        return None


def test_store_slot() -> None:
    algorithm = SyncAlgorithm()
    with pytest.raises(ValueError, match="Store has not been set"):
        algorithm.get_store()
    store = InMemoryLightningStore()
    algorithm.set_store(store)
    assert algorithm.get_store() is store


def test_store_is_held_strongly() -> None:
    algorithm = SyncAlgorithm()
    algorithm.set_store(InMemoryLightningStore())
    gc.collect()
    assert isinstance(algorithm.get_store(), InMemoryLightningStore)


@pytest.mark.parametrize("slot", ["trainer", "adapter"])
def test_weak_slots_raise_when_unset_or_collected(slot: str) -> None:
    algorithm = SyncAlgorithm()
    getter = getattr(algorithm, f"get_{slot}")
    with pytest.raises(ValueError, match="has not been set"):
        getter()
    component = Component()
    getattr(algorithm, f"set_{slot}")(component)
    assert getter() is component
    del component
    gc.collect()
    with pytest.raises(ValueError, match="garbage-collected"):
        getter()


def test_llm_proxy_slot_is_optional() -> None:
    algorithm = SyncAlgorithm()
    assert algorithm.get_llm_proxy() is None
    proxy = Component()
    algorithm.set_llm_proxy(proxy)
    assert algorithm.get_llm_proxy() is proxy
    del proxy
    gc.collect()
    with pytest.raises(ValueError, match="garbage-collected"):
        algorithm.get_llm_proxy()
    algorithm.set_llm_proxy(None)
    assert algorithm.get_llm_proxy() is None


def test_initial_resources_slot() -> None:
    algorithm = SyncAlgorithm()
    assert algorithm.get_initial_resources() is None
    resources = {"prompt": PromptTemplate(template="{x}", engine="f-string")}
    algorithm.set_initial_resources(resources)
    assert algorithm.get_initial_resources() == resources


def test_is_async_and_call() -> None:
    sync, asynchronous = SyncAlgorithm(), AsyncAlgorithm()
    assert not sync.is_async()
    assert asynchronous.is_async()
    sync([1], [2])
    assert sync.seen == [([1], [2])]


def test_base_run_is_not_implemented() -> None:
    with pytest.raises(NotImplementedError, match="run"):
        Algorithm().run()
    with pytest.raises(NotImplementedError, match="legacy client"):
        Algorithm().get_client()


def test_fast_algorithm_is_an_algorithm() -> None:
    assert issubclass(FastAlgorithm, Algorithm)


def test_pickling_keeps_state_and_drops_weak_references() -> None:
    algorithm = SyncAlgorithm()
    trainer = Component()
    algorithm.set_trainer(trainer)
    algorithm.set_initial_resources({"prompt": PromptTemplate(template="{x}", engine="f-string")})
    copy = pickle.loads(pickle.dumps(algorithm))
    assert copy.get_initial_resources() == algorithm.get_initial_resources()
    with pytest.raises(ValueError, match="has not been set"):
        copy.get_trainer()
    assert algorithm.get_trainer() is trainer
