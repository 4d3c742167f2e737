"""`Algorithm`: the base class of everything that drives the training loop."""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agl_core.store.base import LightningStore
    from agl_core.types import Dataset, NamedResources, Resource

__all__ = ["Algorithm"]

_WEAK_SLOTS = ("_trainer_ref", "_adapter_ref", "_llm_proxy_ref")


class Algorithm:
    """Drives the loop: enqueues rollouts, reads their spans through the adapter, publishes resources.

    The trainer fills the injection slots before calling :meth:`run`: the store (held strongly), the
    trainer, the adapter and the LLM proxy (held weakly, so an algorithm never keeps them alive) and the
    initial resources. Implement :meth:`run` as a plain method or as a coroutine; :meth:`is_async` tells
    which.
    """

    _store: LightningStore | None = None
    _trainer_ref: weakref.ReferenceType[Any] | None = None
    _adapter_ref: weakref.ReferenceType[Any] | None = None
    _llm_proxy_ref: weakref.ReferenceType[Any] | None = None
    _initial_resources: NamedResources | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the weak references (process-local); the new process injects them again."""
        state = dict(self.__dict__)
        for slot in _WEAK_SLOTS:
            state.pop(slot, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a pickled algorithm."""
        self.__dict__.update(state)

    # -- trainer ----------------------------------------------------------------------------------

    def set_trainer(self, trainer: Any) -> None:
        """Remember (weakly) the trainer running this algorithm."""
        self._trainer_ref = weakref.ref(trainer)

    def get_trainer(self) -> Any:
        """The trainer; ``ValueError`` when unset or garbage-collected."""
        if self._trainer_ref is None:
            raise ValueError("Trainer has not been set for this algorithm; call set_trainer() first.")
        trainer = self._trainer_ref()
        if trainer is None:
            raise ValueError("The trainer of this algorithm no longer exists (it was garbage-collected).")
        return trainer

    # -- store ------------------------------------------------------------------------------------

    def set_store(self, store: LightningStore) -> None:
        """Set the store the algorithm enqueues rollouts into and reads results from."""
        self._store = store

    def get_store(self) -> LightningStore:
        """The store; ``ValueError`` when unset."""
        if self._store is None:
            raise ValueError(
                "Store has not been set for this algorithm. Run it through a Trainer, or call "
                "algorithm.set_store(store) first."
            )
        return self._store

    # -- adapter ----------------------------------------------------------------------------------

    def set_adapter(self, adapter: Any) -> None:
        """Remember (weakly) the adapter that turns spans into training data."""
        self._adapter_ref = weakref.ref(adapter)

    def get_adapter(self) -> Any:
        """The adapter; ``ValueError`` when unset or garbage-collected."""
        if self._adapter_ref is None:
            raise ValueError("Adapter has not been set for this algorithm; call set_adapter() first.")
        adapter = self._adapter_ref()
        if adapter is None:
            raise ValueError("The adapter of this algorithm no longer exists (it was garbage-collected).")
        return adapter

    # -- LLM proxy --------------------------------------------------------------------------------

    def set_llm_proxy(self, llm_proxy: Any | None) -> None:
        """Remember (weakly) the LLM proxy, or forget it with None."""
        self._llm_proxy_ref = None if llm_proxy is None else weakref.ref(llm_proxy)

    def get_llm_proxy(self) -> Any | None:
        """The LLM proxy, or None when unset; ``ValueError`` when it was garbage-collected."""
        if self._llm_proxy_ref is None:
            return None
        proxy = self._llm_proxy_ref()
        if proxy is None:
            raise ValueError("The LLM proxy of this algorithm no longer exists (it was garbage-collected).")
        return proxy

    # -- initial resources ------------------------------------------------------------------------

    def set_initial_resources(self, resources: Mapping[str, Resource] | None) -> None:
        """Set the resources to publish before the first rollout (copied; None clears them)."""
        self._initial_resources = None if resources is None else dict(resources)

    def get_initial_resources(self) -> NamedResources | None:
        """The initial resources, or None."""
        return self._initial_resources

    # -- running ----------------------------------------------------------------------------------

    def is_async(self) -> bool:
        """True when :meth:`run` is a coroutine function (the trainer then awaits it)."""
        return inspect.iscoroutinefunction(self.run)

    def run(
        self, train_dataset: Dataset[Any] | None = None, val_dataset: Dataset[Any] | None = None
    ) -> Awaitable[None] | None:
        """Run the algorithm on the datasets; subclasses implement it (sync or async)."""
        raise NotImplementedError(f"{type(self).__name__} must implement run(train_dataset, val_dataset).")

    def __call__(
        self, train_dataset: Dataset[Any] | None = None, val_dataset: Dataset[Any] | None = None
    ) -> Awaitable[None] | None:
        """Same as :meth:`run`."""
        return self.run(train_dataset, val_dataset)

    def get_client(self) -> Any:
        """Deprecated (the v0.1 HTTP stack): only algorithms with a legacy server implement it."""
        raise NotImplementedError(
            f"{type(self).__name__} has no legacy client; run it with Trainer.fit() and a store instead."
        )
