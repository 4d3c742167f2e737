"""`Trainer`: wires an algorithm, a store, runners, a tracer, an adapter and an LLM proxy, and runs them."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, Union

from agl_core.algorithm.base import Algorithm
from agl_core.algorithm.fast import FastAlgorithm
from agl_core.execution import ClientServerExecutionStrategy, ExecutionStrategy
from agl_core.plugins import get_registries
from agl_core.registry import Registry
from agl_core.runner.base import Runner
from agl_core.store.base import LightningStore
from agl_core.tracer.base import Tracer
from agl_core.trainer._bundles import TrainerAlgorithmBundle, TrainerRunnerBundle
from agl_core.trainer._workers import WorkerRunners
from agl_core.trainer.init_utils import build_component
from agl_core.types import Hook, ParallelWorkerBase

if TYPE_CHECKING:
    from agl_core.adapter.base import Adapter
    from agl_core.client import AgentLightningClient
    from agl_core.litagent import LitAgent
    from agl_core.program.rollout_hooks import RolloutHooks
    from agl_core.types import Dataset, NamedResources

__all__ = ["Trainer"]

logger = logging.getLogger(__name__)

C = TypeVar("C")

DEFAULT_RUNNER_POLL_SECONDS = 0.25
"""Longest wait between two dequeues of an empty queue, given to runners whose spec does not set one.

The runner backs off from a few milliseconds up to this; LitAgentRunner's own default (5 s, as in Agent
Lightning 0.3) could leave runners asleep for seconds after the algorithm enqueues work.
"""


def _component(
    registry: Registry[C], spec: Any, default: Callable[[], C], defaults: Mapping[str, Any] | None = None
) -> C:
    """Build a component through its plugin registry; ``default()`` when ``spec`` is None."""
    if spec is None:
        return default()
    return registry.create(spec, defaults=defaults)


def _deprecated_alias(old: str, new: str, old_value: Any, new_value: Any) -> Any:
    """Resolve a deprecated constructor argument against its replacement (both warn as 0.3 did)."""
    if old_value is None:
        return new_value
    warnings.warn(f"Trainer({old}=...) is deprecated; use {new}= instead.", DeprecationWarning, stacklevel=3)
    if new_value is None:
        return old_value
    if new_value != old_value:
        warnings.warn(
            f"Trainer got both {old}={old_value!r} and {new}={new_value!r}; ignoring {old}.",
            UserWarning,
            stacklevel=3,
        )
    return new_value


class Trainer(ParallelWorkerBase):
    """Runs an agent with an algorithm: ``Trainer(...).fit(agent, train_dataset, val_dataset=...)``.

    Every component argument accepts an instance, None (the default), a class, a factory, a registered
    name (``"otel"``, ``"baseline"``, ``"apo"`` from a plugin), an import path, or a dict
    ``{"type": <name or path>, **kwargs}``; ``store`` also accepts URIs (``"sqlite:///run.db"``).

    Defaults: tracer `OtelTracer` (AgentOps is the ``agl-agentops`` plugin in agl), adapter
    `TracerTraceToTriplet` (a dict without ``type`` configures it), store `InMemoryLightningStore`, runner
    `LitAgentRunner(tracer=..., max_rollouts=..., poll_interval=0.25)` (a runner spec that does not set
    these gets them too), strategy ``"cs"`` (`ClientServerExecutionStrategy`,
    port ``port`` or 4747), no algorithm (the store is driven from outside) and no LLM proxy.

    Fixes of Agent Lightning 0.3: every runner worker gets its own runner and tracer (quirk 10 in
    docs/migrating-from-agent-lightning.md); a live
    progress display (``progress=False`` turns it off).

    As in 0.3, ``fit_v0(agent, train_data=URL | client, ...)`` runs the deprecated v0.1 worker loop with this
    trainer's tracer, algorithm, ``n_workers`` (= ``n_runners``), ``max_tasks`` (= ``max_rollouts``),
    ``daemon`` and ``triplet_exporter`` (= ``adapter``); it is the agl-legacy plugin's ``TrainerLegacy``.

    Args:
        dev: Deprecated; use :meth:`dev`.
        n_runners: Runner workers (default 1); a strategy instance with ``n_runners > 0`` overrides it.
        max_rollouts: Each runner stops after this many rollouts (None: until the algorithm is done).
        initial_resources: Resources the algorithm publishes before the first rollout.
        tracer: The tracer spec.
        adapter: The adapter spec (turns spans into training data).
        store: The store spec.
        runner: The runner spec.
        strategy: A registered name (``"shm"``, ``"cs"``, ``"ray"`` from agl-ray), a dict, a class or an
            instance.
        port: Port of the client-server strategy's store server (0: any free port).
        algorithm: The algorithm spec (None: no algorithm).
        llm_proxy: An `LLMProxy` (or spec; it gets the store).
        n_workers: Deprecated alias of ``n_runners``.
        max_tasks: Deprecated alias of ``max_rollouts``.
        daemon: Kept for tracers that take it.
        triplet_exporter: Deprecated alias of ``adapter``.
        hooks: A `Hook` or a sequence of them, called by every runner.
        rollout_hooks: `RolloutHooks` (or a sequence) run where the store is: before each rollout is
            enqueued, when one succeeds, when one finally fails; the store is wrapped in a `HookedStore`.
        progress: Show live progress while fitting.
    """

    def __init__(
        self,
        *,
        dev: bool = False,
        n_runners: int | None = None,
        max_rollouts: int | None = None,
        initial_resources: NamedResources | None = None,
        tracer: Any = None,
        adapter: Any = None,
        store: Any = None,
        runner: Any = None,
        strategy: Any = None,
        port: int | None = None,
        algorithm: Any = None,
        llm_proxy: Any = None,
        n_workers: int | None = None,
        max_tasks: int | None = None,
        daemon: bool = True,
        triplet_exporter: Any = None,
        hooks: Hook | Sequence[Hook] | None = None,
        progress: bool = True,
        rollout_hooks: RolloutHooks | Sequence[RolloutHooks] | None = None,
    ) -> None:
        if dev:
            warnings.warn(
                "Trainer(dev=True) is deprecated; call trainer.dev(agent, dataset) instead.",
                DeprecationWarning,
                stacklevel=2,
            )
        self._dev = bool(dev)
        n_runners = _deprecated_alias("n_workers", "n_runners", n_workers, n_runners)
        max_rollouts = _deprecated_alias("max_tasks", "max_rollouts", max_tasks, max_rollouts)
        if triplet_exporter is not None:
            warnings.warn(
                "Trainer(triplet_exporter=...) is deprecated; use adapter= instead.",
                DeprecationWarning,
                stacklevel=2,
            )
            if adapter is None:
                adapter = triplet_exporter
        if n_runners is None:
            n_runners = 1
        if not isinstance(n_runners, int) or isinstance(n_runners, bool) or n_runners < 0:
            raise ValueError(f"n_runners must be an integer >= 0, got {n_runners!r}.")
        if max_rollouts is not None and (not isinstance(max_rollouts, int) or max_rollouts < 1):
            raise ValueError(f"max_rollouts must be None or an integer >= 1, got {max_rollouts!r}.")
        self.n_runners: int = n_runners
        self.max_rollouts = max_rollouts
        self.initial_resources = initial_resources
        self.port = port
        self.daemon = daemon
        self.progress = progress

        self.strategy: ExecutionStrategy = self._build_strategy(strategy, port)
        strategy_runners = getattr(self.strategy, "n_runners", None)
        if (
            isinstance(strategy_runners, int)
            and not isinstance(strategy_runners, bool)
            and strategy_runners > 0
        ):
            self.n_runners = strategy_runners
        self.tracer: Tracer = self._build_tracer(tracer)
        self.adapter: Adapter[Any, Any] = self._build_adapter(adapter)
        self.algorithm: Algorithm | None = (
            None if algorithm is None else get_registries().algorithm.create(algorithm)
        )
        self.store: LightningStore = self._build_store(store)
        if rollout_hooks is not None:
            from agl_core.program.rollout_hooks import with_rollout_hooks

            self.store = with_rollout_hooks(self.store, rollout_hooks)
        self.runner: Runner[Any] = self._build_runner(runner)
        self.llm_proxy: Any = self._build_llm_proxy(llm_proxy)
        self.hooks: tuple[Hook, ...] = self._normalize_hooks(hooks)

    # ------------------------------------------------------------------------------ 0.3's legacy names

    @property
    def n_workers(self) -> int:
        """Deprecated alias of ``n_runners`` (the worker count of `fit_v0`)."""
        return self.n_runners

    @n_workers.setter
    def n_workers(self, value: int) -> None:
        self.n_runners = value

    @property
    def max_tasks(self) -> int | None:
        """Deprecated alias of ``max_rollouts`` (the tasks per worker of `fit_v0`)."""
        return self.max_rollouts

    @max_tasks.setter
    def max_tasks(self, value: int | None) -> None:
        self.max_rollouts = value

    @property
    def triplet_exporter(self) -> Any:
        """Deprecated alias of ``adapter`` (`fit_v0` needs a `TracerTraceToTriplet`)."""
        return self.adapter

    @triplet_exporter.setter
    def triplet_exporter(self, value: Any) -> None:
        self.adapter = value

    def fit_v0(
        self,
        agent: LitAgent[Any],
        train_data: str | AgentLightningClient | Dataset[Any],
        **kwargs: Any,
    ) -> None:
        """Agent Lightning 0.3's v0.1 loop against an `AgentLightningServer` (``pip install agl-legacy``).

        Runs agl-legacy's ``TrainerLegacy.fit_v0`` with this trainer's settings; ``kwargs`` are its
        ``val_data``, ``dev_data`` and ``dev_backend``.
        """
        from agl_core._compat import import_required

        legacy = import_required("agl_legacy.trainer", "Trainer.fit_v0", "agl-legacy")
        legacy.TrainerLegacy.for_trainer(self).fit_v0(agent, train_data, **kwargs)

    # ------------------------------------------------------------------------------ components

    def _build_strategy(self, spec: Any, port: int | None) -> ExecutionStrategy:
        defaults: dict[str, Any] = {"n_runners": self.n_runners}
        if port is not None:
            defaults["server_port"] = port

        def default() -> ExecutionStrategy:
            return ClientServerExecutionStrategy(**defaults)

        strategy = _component(get_registries().strategy, spec, default, defaults)
        if port is not None and isinstance(strategy, ClientServerExecutionStrategy):
            strategy.server_port = port
        return strategy

    def _build_tracer(self, spec: Any) -> Tracer:
        def default() -> Tracer:
            from agl_core.tracer.otel import OtelTracer

            return OtelTracer()

        return _component(get_registries().tracer, spec, default)

    def _build_adapter(self, spec: Any) -> Adapter[Any, Any]:
        from agl_core.adapter.triplet import TracerTraceToTriplet

        registry = get_registries().adapter
        if isinstance(spec, Mapping) and "type" not in spec and "name" not in spec:
            return registry.create(
                TracerTraceToTriplet, **spec
            )  # a dict without a type configures the default
        return _component(registry, spec, TracerTraceToTriplet)

    def _build_store(self, spec: Any) -> LightningStore:
        def default() -> LightningStore:
            from agl_core.store.memory import InMemoryLightningStore

            return InMemoryLightningStore()

        return _component(get_registries().store, spec, default)

    def _build_runner(self, spec: Any) -> Runner[Any]:
        defaults = {
            "tracer": self.tracer,
            "max_rollouts": self.max_rollouts,
            "poll_interval": DEFAULT_RUNNER_POLL_SECONDS,
        }

        def default() -> Runner[Any]:
            from agl_core.runner.agent import LitAgentRunner

            return LitAgentRunner(
                tracer=self.tracer, max_rollouts=self.max_rollouts, poll_interval=DEFAULT_RUNNER_POLL_SECONDS
            )

        return _component(get_registries().runner, spec, default, defaults)

    def _build_llm_proxy(self, spec: Any) -> Any:
        if spec is None:
            return None
        from agl_core.llm_proxy import LLMProxy

        if isinstance(spec, LLMProxy):
            return spec
        return build_component(
            spec, expected_type=LLMProxy, spec_name="llm_proxy", optional_defaults={"store": self.store}
        )

    @staticmethod
    def _normalize_hooks(hooks: Hook | Sequence[Hook] | None) -> tuple[Hook, ...]:
        if hooks is None:
            return ()
        items = (hooks,) if isinstance(hooks, Hook) else tuple(hooks)
        for hook in items:
            if not isinstance(hook, Hook):
                raise TypeError(
                    "hooks must be agl.Hook instances (subclass agl.Hook and override its on_* methods), got "
                    f"{type(hook).__name__}."
                )
        return items

    # ------------------------------------------------------------------------------ running

    def fit(
        self,
        agent: LitAgent[Any],
        train_dataset: Dataset[Any] | None = None,
        *,
        val_dataset: Dataset[Any] | None = None,
    ) -> None:
        """Run the algorithm and the runners on ``agent`` until the algorithm is done.

        Ctrl-C stops every runner (in-flight attempts are reported as failed, so the store retries them
        per their ``RolloutConfig``) and every process this run started.

        A string ``train_dataset`` is 0.3's v0.1 form ``fit(agent, "http://server")``: it logs a warning and
        runs `fit_v0` (0.3 meant to do the same but passed ``val_dataset`` positionally and raised
        `TypeError`).
        """
        if isinstance(train_dataset, str):
            logger.warning(
                "Trainer.fit(agent, %r): a server URL is the v0.1 form; running Trainer.fit_v0 instead (call "
                "fit_v0 directly, or migrate to fit() with a store: docs/migrating-from-agent-lightning.md).",
                train_dataset,
            )
            self.fit_v0(agent, train_dataset, val_data=val_dataset)
            return
        if self._dev:
            self.dev(agent, train_dataset, val_dataset=val_dataset)
            return
        self._run(agent, self.algorithm, train_dataset, val_dataset)

    def dev(
        self,
        agent: LitAgent[Any],
        train_dataset: Dataset[Any] | None = None,
        *,
        val_dataset: Dataset[Any] | None = None,
    ) -> None:
        """Check an agent end to end with a fast algorithm (``Baseline()`` unless one is configured).

        Raises:
            TypeError: the configured algorithm is not a `FastAlgorithm`.
        """
        algorithm = self.algorithm
        if algorithm is None:
            from agl_core.algorithm.baseline import Baseline

            algorithm = Baseline()
        if not isinstance(algorithm, FastAlgorithm):
            raise TypeError(
                "Trainer.dev() requires an algorithm that inherits from FastAlgorithm. "
                f"Found {type(algorithm).__name__}. Use Trainer.fit() to train with it, or pass a fast "
                "algorithm such as agl.Baseline() for a quick end-to-end check."
            )
        self._run(agent, algorithm, train_dataset, val_dataset)

    def _run(
        self,
        agent: LitAgent[Any],
        algorithm: Algorithm | None,
        train_dataset: Dataset[Any] | None,
        val_dataset: Dataset[Any] | None,
    ) -> None:
        if isinstance(train_dataset, str):
            raise TypeError(
                "train_dataset is a string: that is the v0.1 form (agent, 'http://server'); run it with "
                "Trainer.fit_v0(agent, url). Pass a dataset (e.g. a list of tasks) here, or run remote "
                "runners with `agl runner --store http://host:port --agent module:agent`."
            )
        set_trainer = getattr(agent, "set_trainer", None)
        if callable(set_trainer):
            set_trainer(self)
        algorithm_bundle = TrainerAlgorithmBundle(self, algorithm, train_dataset, val_dataset)
        runner_bundle = TrainerRunnerBundle(self, agent, WorkerRunners(self.runner, max(1, self.n_runners)))
        self.strategy.execute(algorithm_bundle, runner_bundle, self.store)


_C = TypeVar("_C")

ComponentSpec = Union[_C, type[_C], Callable[[], _C], str, dict[str, Any], None]  # noqa: UP007
"""How a `Trainer` argument may give a component: an instance, a class, a factory, a registered name,
a config dict (``{"type": ..., **kwargs}``) or None for the default (Agent Lightning 0.3's alias)."""
