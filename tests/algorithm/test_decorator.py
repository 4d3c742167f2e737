"""@algo: argument injection by name, sync and async functions, datasets the function does not take."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from agl_core.algorithm import Algorithm, FunctionalAlgorithm, algo
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import PromptTemplate


class Component:
    """A weak-referenceable stand-in for an adapter or a proxy."""


def wire(algorithm: Algorithm) -> tuple[InMemoryLightningStore, Component, Component, dict[str, Any]]:
    store, adapter, proxy = InMemoryLightningStore(), Component(), Component()
    resources: dict[str, Any] = {"prompt": PromptTemplate(template="{x}", engine="f-string")}
    algorithm.set_store(store)
    algorithm.set_adapter(adapter)
    algorithm.set_llm_proxy(proxy)
    algorithm.set_initial_resources(resources)
    return store, adapter, proxy, resources


def test_sync_function_gets_everything_it_names() -> None:
    seen: dict[str, Any] = {}

    @algo
    def my_algo(
        store: Any, adapter: Any, llm_proxy: Any, initial_resources: Any, train_dataset: Any, val_dataset: Any
    ) -> None:
        """Doc of my_algo."""
        seen.update(
            store=store,
            adapter=adapter,
            llm_proxy=llm_proxy,
            initial_resources=initial_resources,
            train_dataset=train_dataset,
            val_dataset=val_dataset,
        )

    assert isinstance(my_algo, FunctionalAlgorithm)
    store, adapter, proxy, resources = wire(my_algo)
    assert my_algo.run([1], [2]) is None
    assert seen == {
        "store": store,
        "adapter": adapter,
        "llm_proxy": proxy,
        "initial_resources": resources,
        "train_dataset": [1],
        "val_dataset": [2],
    }
    assert not my_algo.is_async()
    assert my_algo.__name__ == "my_algo"
    assert my_algo.__doc__ == "Doc of my_algo."
    assert next(iter(inspect.signature(my_algo).parameters)) == "store"


async def test_async_function_returns_an_awaitable() -> None:
    seen: list[Any] = []

    @algo
    async def my_algo(store: Any, train_dataset: Any = None) -> None:
        seen.append((store, train_dataset))

    store, *_ = wire(my_algo)
    assert my_algo.is_async()
    await my_algo.run(train_dataset=["a"])  # type: ignore[misc]
    assert seen == [(store, ["a"])]


def test_only_named_parameters_are_injected() -> None:
    calls: list[Any] = []

    @algo
    def my_algo(*args: Any, **kwargs: Any) -> None:
        calls.append((args, kwargs))

    wire(my_algo)
    my_algo.run()
    assert calls == [((), {})]


@pytest.mark.parametrize("name", ["train_dataset", "val_dataset"])
def test_a_dataset_the_function_does_not_take_is_a_type_error(name: str) -> None:
    @algo
    def my_algo(store: Any) -> None:
        return None

    wire(my_algo)
    with pytest.raises(TypeError, match=f"{name} is provided but not supported by the algorithm function"):
        my_algo.run(**{name: [1]})


def test_missing_store_is_reported() -> None:
    @algo
    def my_algo(store: Any) -> None:
        return None

    with pytest.raises(ValueError, match="Store has not been set"):
        my_algo.run()


def test_calling_the_instance_calls_the_function() -> None:
    @algo
    def my_algo(store: Any, x: int = 0) -> int:
        return x * 2

    assert my_algo(store=None, x=21) == 42


def test_algo_rejects_non_callables() -> None:
    with pytest.raises(TypeError, match="expects a function"):
        algo(3)  # type: ignore[arg-type]
