"""Helpers for writing algorithms: argument injection decorators and dataset batching."""

from __future__ import annotations

import functools
import inspect
import logging
import random
from collections import deque
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, cast

if TYPE_CHECKING:
    from agl_core.algorithm.base import Algorithm
    from agl_core.store.base import LightningStore
    from agl_core.types import Dataset

__all__ = ["batch_iter_over_dataset", "with_llm_proxy", "with_store"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")
A = TypeVar("A", bound="Algorithm")


def _drop_first_parameter(wrapper: Callable[..., Any], func: Callable[..., Any]) -> None:
    """Show ``func``'s signature minus the injected parameter (the one right after ``self``)."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return
    if len(params) >= 2:
        wrapper.__signature__ = inspect.Signature([params[0], *params[2:]])  # type: ignore[attr-defined]


def with_store(func: Callable[Concatenate[A, LightningStore, P], R]) -> Callable[Concatenate[A, P], R]:
    """Inject ``self.get_store()`` as the argument after ``self``.

    Decorate a method declared as ``(self, store, *args, **kwargs)``; callers call it without ``store``.
    Works on sync and async methods.
    """
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def async_wrapper(self: A, *args: P.args, **kwargs: P.kwargs) -> Any:
            return await func(self, self.get_store(), *args, **kwargs)

        _drop_first_parameter(async_wrapper, func)
        return cast("Callable[Concatenate[A, P], R]", async_wrapper)

    @functools.wraps(func)
    def wrapper(self: A, *args: P.args, **kwargs: P.kwargs) -> R:
        return func(self, self.get_store(), *args, **kwargs)

    _drop_first_parameter(wrapper, func)
    return cast("Callable[Concatenate[A, P], R]", wrapper)


def with_llm_proxy(
    *, required: bool = False, auto_start: bool = True
) -> Callable[
    [Callable[Concatenate[A, Any, P], Coroutine[Any, Any, R]]],
    Callable[Concatenate[A, P], Coroutine[Any, Any, R]],
]:
    """Inject ``self.get_llm_proxy()`` (or None) as the argument after ``self`` of a coroutine method.

    Stack it above :func:`with_store` for ``async def run(self, store, llm_proxy, train_dataset=None,
    val_dataset=None)``.

    Args:
        required: Raise ``ValueError`` when no proxy is configured.
        auto_start: Start a proxy that is not running before the call and stop it afterwards; a proxy that
            is already running is left alone.
    """

    def decorate(
        func: Callable[Concatenate[A, Any, P], Coroutine[Any, Any, R]],
    ) -> Callable[Concatenate[A, P], Coroutine[Any, Any, R]]:
        if not inspect.iscoroutinefunction(func):
            raise TypeError(
                f"@with_llm_proxy decorates coroutine methods (async def), and {func.__qualname__} is "
                "not one: starting and stopping the proxy needs await."
            )

        @functools.wraps(func)
        async def wrapper(self: A, *args: P.args, **kwargs: P.kwargs) -> R:
            llm_proxy = self.get_llm_proxy()
            if llm_proxy is None:
                if required:
                    raise ValueError(
                        f"LLM proxy is required but not configured for {type(self).__name__}. Pass one "
                        "to the trainer (Trainer(llm_proxy=LLMProxy(...))) or call set_llm_proxy(proxy)."
                    )
                return await func(self, None, *args, **kwargs)
            started = False
            if auto_start and not llm_proxy.is_running():
                await llm_proxy.start()
                started = True
            try:
                return await func(self, llm_proxy, *args, **kwargs)
            finally:
                if started:
                    try:
                        await llm_proxy.stop()
                    except Exception:
                        logger.exception("Stopping the LLM proxy started for %s failed.", type(self).__name__)

        _drop_first_parameter(wrapper, func)
        return cast("Callable[Concatenate[A, P], Coroutine[Any, Any, R]]", wrapper)

    return decorate


def batch_iter_over_dataset(
    dataset: Dataset[T], batch_size: int, *, rng: random.Random | None = None
) -> Iterator[Sequence[T]]:
    """Yield shuffled batches of samples forever.

    When ``batch_size >= len(dataset)`` every batch is the whole dataset, freshly shuffled. Otherwise the
    batches walk through shuffled epochs: every sample appears once per epoch, and a batch may straddle
    two epochs, but never holds the same sample twice (a sample that would repeat is moved to the next
    batch instead of being dropped).

    Args:
        dataset: Anything with ``len()`` and integer indexing.
        batch_size: Samples per batch (> 0).
        rng: Random generator to use (for reproducible order); the ``random`` module by default.

    Raises:
        ValueError: ``batch_size`` is not positive or the dataset is empty.
    """
    if batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.")
    size = len(dataset)
    if size == 0:
        raise ValueError("batch_iter_over_dataset() needs a non-empty dataset.")
    shuffle = (rng or random).shuffle
    return _iter_batches(dataset, batch_size, size, shuffle)


def _iter_batches(
    dataset: Dataset[T], batch_size: int, size: int, shuffle: Callable[[list[int]], None]
) -> Iterator[Sequence[T]]:
    if batch_size >= size:
        while True:
            samples = [dataset[i] for i in range(size)]
            shuffle(samples)  # type: ignore[arg-type]
            yield samples
    pending: deque[int] = deque()
    deferred: list[int] = []
    while True:
        batch: list[int] = list(deferred)
        deferred.clear()
        while len(batch) < batch_size:
            if not pending:
                order = list(range(size))
                shuffle(order)
                pending.extend(order)
            index = pending.popleft()
            if index in batch:
                deferred.append(index)
            else:
                batch.append(index)
        yield [dataset[i] for i in batch]
