"""Algorithm helpers: with_store, with_llm_proxy (against the real LLM proxy) and batch_iter_over_dataset."""

from __future__ import annotations

import inspect
import itertools
import random
from collections import Counter
from typing import Any

import pytest

from agl_core.algorithm import Algorithm, batch_iter_over_dataset, with_llm_proxy, with_store
from agl_core.llm_proxy import LLMProxy
from agl_core.store.memory import InMemoryLightningStore


class Recorder(Algorithm):
    """Stacks the helpers as upstream does: ``@with_llm_proxy() @with_store async def run(...)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    @with_llm_proxy()
    @with_store
    async def run(
        self, store: Any, llm_proxy: Any, train_dataset: Any = None, val_dataset: Any = None
    ) -> None:
        running = llm_proxy.is_running() if llm_proxy is not None else None
        self.calls.append((store, llm_proxy, running, train_dataset, val_dataset))

    @with_store
    def sync_method(self, store: Any, value: int) -> tuple[Any, int]:
        return store, value


class RequiresProxy(Algorithm):
    @with_llm_proxy(required=True)
    async def run(self, llm_proxy: Any, train_dataset: Any = None, val_dataset: Any = None) -> None:
        return None


async def test_with_store_injects_the_store_into_sync_and_async_methods() -> None:
    algorithm = Recorder()
    store = InMemoryLightningStore()
    algorithm.set_store(store)
    assert algorithm.is_async()
    await algorithm.run([1], val_dataset=[2])
    assert algorithm.calls == [(store, None, None, [1], [2])]
    assert algorithm.sync_method(5) == (store, 5)
    assert list(inspect.signature(Recorder.sync_method).parameters) == ["self", "value"]


async def test_with_store_without_a_store_says_how_to_set_one() -> None:
    with pytest.raises(ValueError, match="set_store"):
        await Recorder().run()


async def test_with_llm_proxy_starts_and_stops_a_proxy_that_was_not_running() -> None:
    store = InMemoryLightningStore()
    algorithm = Recorder()
    algorithm.set_store(store)
    proxy = LLMProxy(store=store)
    algorithm.set_llm_proxy(proxy)
    await algorithm.run()
    assert algorithm.calls == [(store, proxy, True, None, None)]
    assert not proxy.is_running()


async def test_with_llm_proxy_leaves_a_running_proxy_running() -> None:
    store = InMemoryLightningStore()
    algorithm = Recorder()
    algorithm.set_store(store)
    proxy = LLMProxy(store=store)
    await proxy.start()
    try:
        algorithm.set_llm_proxy(proxy)
        await algorithm.run()
        assert proxy.is_running()
    finally:
        await proxy.stop()


async def test_with_llm_proxy_required_without_proxy_explains_the_fix() -> None:
    with pytest.raises(ValueError, match=r"LLM proxy is required but not configured.*set_llm_proxy"):
        await RequiresProxy().run()


def test_with_llm_proxy_refuses_sync_methods() -> None:
    with pytest.raises(TypeError, match="coroutine"):

        @with_llm_proxy()  # type: ignore[arg-type]
        def run(self: Any, llm_proxy: Any) -> None:
            return None


def test_batches_of_the_whole_dataset_are_reshuffled_each_time() -> None:
    dataset = list(range(6))
    batches = list(itertools.islice(batch_iter_over_dataset(dataset, 10, rng=random.Random(0)), 5))
    assert all(sorted(batch) == dataset for batch in batches)
    assert len({tuple(batch) for batch in batches}) > 1


@pytest.mark.parametrize(("size", "batch_size"), [(10, 3), (7, 2), (5, 4), (9, 9)])
def test_smaller_batches_cover_every_sample_evenly_without_repeats(size: int, batch_size: int) -> None:
    dataset = [f"s{i}" for i in range(size)]
    batches = list(itertools.islice(batch_iter_over_dataset(dataset, batch_size, rng=random.Random(1)), 60))
    assert all(len(batch) == min(batch_size, size) for batch in batches)
    assert all(len(set(batch)) == len(batch) for batch in batches)
    counts = Counter(sample for batch in batches for sample in batch)
    assert set(counts) == set(dataset)
    assert max(counts.values()) - min(counts.values()) <= 1


def test_first_epoch_holds_every_sample_exactly_once() -> None:
    dataset = list(range(12))
    batches = list(itertools.islice(batch_iter_over_dataset(dataset, 4), 3))
    assert sorted(itertools.chain.from_iterable(batches)) == dataset


def test_batch_iter_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        batch_iter_over_dataset([1, 2], 0)
    with pytest.raises(ValueError, match="non-empty"):
        batch_iter_over_dataset([], 3)
