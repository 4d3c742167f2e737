"""`@algo`: turn a plain function into an `Algorithm`."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol, Union

from agl_core.algorithm.base import Algorithm

if TYPE_CHECKING:
    from agl_core.store.base import LightningStore
    from agl_core.types import Dataset

__all__ = ["FunctionalAlgorithm", "algo"]

_INJECTABLE = ("store", "adapter", "llm_proxy", "initial_resources")


class FunctionalAlgorithm(Algorithm):
    """An algorithm made from a sync or async function; calling the instance calls the function.

    :meth:`run` passes keyword arguments by parameter name: ``store``, ``adapter``, ``llm_proxy``,
    ``initial_resources``, ``train_dataset`` and ``val_dataset``. ``*args``/``**kwargs`` receive nothing.
    The function's name, docstring and signature are kept.
    """

    __name__: str
    __qualname__: str
    __wrapped__: Callable[..., Any]

    def __init__(self, algorithm_func: Callable[..., Any]) -> None:
        if not callable(algorithm_func):
            raise TypeError(f"@algo expects a function, got {type(algorithm_func).__name__}.")
        self._algorithm_func = algorithm_func
        self._sig = inspect.signature(algorithm_func)
        self._is_async_func = inspect.iscoroutinefunction(algorithm_func)
        functools.update_wrapper(self, algorithm_func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the original function unchanged."""
        return self._algorithm_func(*args, **kwargs)

    def is_async(self) -> bool:
        """True when the wrapped function is a coroutine function."""
        return self._is_async_func

    def _accepts(self, name: str) -> bool:
        param = self._sig.parameters.get(name)
        return param is not None and param.kind not in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
            inspect.Parameter.POSITIONAL_ONLY,
        )

    def run(
        self, train_dataset: Dataset[Any] | None = None, val_dataset: Dataset[Any] | None = None
    ) -> Awaitable[None] | None:
        """Call the function with the injected arguments; returns its awaitable when it is async.

        Raises:
            TypeError: a dataset is given but the function has no parameter for it.
            ValueError: the function asks for the store or adapter and none is set.
        """
        getters: dict[str, Callable[[], Any]] = {
            "store": self.get_store,
            "adapter": self.get_adapter,
            "llm_proxy": self.get_llm_proxy,
            "initial_resources": self.get_initial_resources,
        }
        kwargs: dict[str, Any] = {name: getters[name]() for name in _INJECTABLE if self._accepts(name)}
        for name, dataset in (("train_dataset", train_dataset), ("val_dataset", val_dataset)):
            if self._accepts(name):
                kwargs[name] = dataset
            elif dataset is not None:
                raise TypeError(
                    f"{name} is provided but not supported by the algorithm function: "
                    f"{self._algorithm_func.__qualname__}{self._sig}. Add a `{name}` parameter to it."
                )
        result = self._algorithm_func(**kwargs)
        return result if self._is_async_func else None


def algo(func: Callable[..., Any]) -> FunctionalAlgorithm:
    """Make an :class:`~agl_core.algorithm.Algorithm` from a function.

    Example::

        @agl.algo
        async def my_algorithm(store, train_dataset):
            for sample in train_dataset:
                await store.enqueue_rollout(sample, mode="train")
    """
    return FunctionalAlgorithm(func)


# ---------------------------------------------------------------------------------------------------------
# The shapes of function `algo` accepts, as Agent Lightning 0.3 named them (for type annotations).


class AlgorithmFuncSyncFull(Protocol):
    """A sync algorithm function taking the store and both datasets."""

    def __call__(
        self, *, store: LightningStore, train_dataset: Dataset[Any] | None, val_dataset: Dataset[Any] | None
    ) -> None: ...


class AlgorithmFuncSyncOnlyStore(Protocol):
    """A sync algorithm function taking only the store."""

    def __call__(self, *, store: LightningStore) -> None: ...


class AlgorithmFuncSyncOnlyDataset(Protocol):
    """A sync algorithm function taking only the datasets."""

    def __call__(self, *, train_dataset: Dataset[Any] | None, val_dataset: Dataset[Any] | None) -> None: ...


class AlgorithmFuncAsyncFull(Protocol):
    """An async algorithm function taking the store and both datasets."""

    def __call__(
        self, *, store: LightningStore, train_dataset: Dataset[Any] | None, val_dataset: Dataset[Any] | None
    ) -> Awaitable[None]: ...


class AlgorithmFuncAsyncOnlyStore(Protocol):
    """An async algorithm function taking only the store."""

    def __call__(self, *, store: LightningStore) -> Awaitable[None]: ...


class AlgorithmFuncAsyncOnlyDataset(Protocol):
    """An async algorithm function taking only the datasets."""

    def __call__(
        self, *, train_dataset: Dataset[Any] | None, val_dataset: Dataset[Any] | None
    ) -> Awaitable[None]: ...


class AlgorithmFuncSyncFallback(Protocol):
    """Any other sync callable (its parameters are filled by name)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


class AlgorithmFuncAsyncFallback(Protocol):
    """Any other async callable (its parameters are filled by name)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Awaitable[Any]: ...


AlgorithmFuncSync = Union[AlgorithmFuncSyncOnlyStore, AlgorithmFuncSyncOnlyDataset, AlgorithmFuncSyncFull]  # noqa: UP007
"""The sync shapes 0.3 documented."""
AlgorithmFuncAsync = Union[AlgorithmFuncAsyncOnlyStore, AlgorithmFuncAsyncOnlyDataset, AlgorithmFuncAsyncFull]  # noqa: UP007
"""The async shapes 0.3 documented."""
AlgorithmFuncSyncLike = Union[AlgorithmFuncSync, AlgorithmFuncSyncFallback]  # noqa: UP007
"""Any sync function `algo` accepts."""
AlgorithmFuncAsyncLike = Union[AlgorithmFuncAsync, AlgorithmFuncAsyncFallback]  # noqa: UP007
"""Any async function `algo` accepts."""
AlgorithmFunc = Union[AlgorithmFuncSyncLike, AlgorithmFuncAsyncLike]  # noqa: UP007
"""Any function `algo` accepts."""
AsyncFlag = Literal[True, False]
"""Whether a `FunctionalAlgorithm` wraps an async function."""
