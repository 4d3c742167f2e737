"""The whole agl plugin contract: seven registration hooks, versioned by :data:`PLUGIN_API_VERSION`.

A plugin is a module (or object) with functions decorated by :data:`agl_core.hookimpl` whose names
are the hooks below. It is found through an entry point in group ``agl``::

    [project.entry-points.agl]
    redis = "agl_redis.hooks"

Each hook receives a registry and adds named implementations to it. The six registration hooks are
pluggy *historic* hooks: the core calls each once with its registry, and pluggy calls a plugin registered
later with the same registry as it registers. Targets are ``"module:attr"``
strings that are imported only when the implementation is first used, so discovering plugins
never imports heavy backends. A hook implementation may accept fewer arguments than the spec
(pluggy's opt-in arguments), which lets specs gain parameters without breaking plugins.

A plugin declares the contract version it was built for with a module attribute next to its hooks::

    AGL_PLUGIN_API_VERSION = 1

``agl plugins check`` reports a plugin whose declared version differs from the core's
:data:`PLUGIN_API_VERSION` (see docs/plugins.md, "Contract versions"). Each hook notes the contract version
it was added or last changed in.

Nothing else lives in this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import click

    from agl_core.adapter.base import Adapter
    from agl_core.algorithm.base import Algorithm
    from agl_core.execution.base import ExecutionStrategy
    from agl_core.registry import Registry
    from agl_core.runner.base import Runner
    from agl_core.store.base import LightningStore
    from agl_core.tracer.base import Tracer

PROJECT_NAME = "agl"
"""The pluggy project name and the entry-point group."""

PLUGIN_API_VERSION = 1
"""Version of this contract. It is bumped when a change can break a plugin built for the previous one: a
hook removed or renamed, a hook argument removed or changed in meaning, or the registry methods hooks
call (``Registry.add``) or the component base classes changing incompatibly. Adding a hook, or an
argument a hook may ignore (pluggy's opt-in arguments), does not bump it."""

PLUGIN_API_VERSION_ATTRIBUTE = "AGL_PLUGIN_API_VERSION"
"""The module attribute in which a plugin declares the contract version it was built for."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec(historic=True)
def agl_register_algorithms(registry: Registry[Algorithm]) -> None:
    """Add :class:`~agl_core.Algorithm` implementations.

    *Added in contract 1 (agl 0.4.0).*

    Example (``agl_apo/hooks.py``)::

        from agl_core import hookimpl

        @hookimpl
        def agl_register_algorithms(registry):
            registry.add(
                "apo",
                "agl_apo.algorithm:APO",
                summary="Automatic prompt optimization (textual gradients + beam search)",
                requires=["openai>=1.0"],
            )

    Users then pick it by name: ``Trainer(algorithm="apo")``.
    """


@hookspec(historic=True)
def agl_register_runners(registry: Registry[Runner[Any]]) -> None:
    """Add :class:`~agl_core.Runner` implementations.

    *Added in contract 1 (agl 0.4.0).*

    Example::

        from agl_core import hookimpl

        @hookimpl
        def agl_register_runners(registry):
            registry.add("sandboxed", "agl_sandbox.runner:SandboxedRunner",
                         summary="Runs each rollout in a fresh container")

    Users then pick it by name: ``Trainer(runner="sandboxed")``.
    """


@hookspec(historic=True)
def agl_register_tracers(registry: Registry[Tracer]) -> None:
    """Add :class:`~agl_core.Tracer` implementations.

    *Added in contract 1 (agl 0.4.0).*

    Example::

        from agl_core import hookimpl

        @hookimpl
        def agl_register_tracers(registry):
            registry.add("agentops", "agl_agentops.tracer:AgentOpsTracer",
                         summary="AgentOps-instrumented tracer", requires=["agentops>=0.4"])

    Users then pick it by name: ``Trainer(tracer="agentops")``.
    """


@hookspec(historic=True)
def agl_register_adapters(registry: Registry[Adapter[Any, Any]]) -> None:
    """Add :class:`~agl_core.Adapter` implementations (spans to training data).

    *Added in contract 1 (agl 0.4.0).*

    Example::

        from agl_core import hookimpl

        @hookimpl
        def agl_register_adapters(registry):
            registry.add("trajectories", "agl_traj.adapter:TraceToTrajectory",
                         summary="Whole-trajectory samples with token masks")

    Users then pick it by name: ``Trainer(adapter="trajectories")``.
    """


@hookspec(historic=True)
def agl_register_stores(registry: Registry[LightningStore]) -> None:
    """Add :class:`~agl_core.LightningStore` implementations and the URI schemes they open.

    *Added in contract 1 (agl 0.4.0).*

    Example::

        from agl_core import hookimpl

        @hookimpl
        def agl_register_stores(registry):
            registry.add("redis", "agl_redis.store:RedisStore",
                         summary="Rollouts and spans in Redis", requires=["redis>=5"],
                         schemes=["redis", "rediss"])

    ``agl_core.store.open_store("redis://localhost:6379/0")`` then calls
    ``RedisStore.from_uri("redis://localhost:6379/0")``.
    """


@hookspec(historic=True)
def agl_register_strategies(registry: Registry[ExecutionStrategy]) -> None:
    """Add :class:`~agl_core.execution.ExecutionStrategy` implementations (how runners are laid out).

    *Added in contract 1 (agl 0.4.0).*

    Example (``agl_ray/hooks.py``)::

        from agl_core import hookimpl

        @hookimpl
        def agl_register_strategies(registry):
            registry.add("ray", "agl_ray.strategy:RayExecutionStrategy",
                         summary="Runners as Ray actors; the algorithm in the driver",
                         requires=["ray>=2.40"])

    Users then pick it by name: ``Trainer(strategy="ray")`` or
    ``Trainer(strategy={"type": "ray", "n_runners": 8})``. The core's ``shm`` and ``cs`` register here too.

    The target builds an :class:`~agl_core.execution.ExecutionStrategy`; the trainer passes
    ``n_runners`` (and ``server_port``) when the constructor accepts them. ``agl runner --strategy NAME``
    builds it with ``role="runner"``, ``store_uri``, ``n_runners``, ``first_worker_id``,
    ``graceful_timeout`` (and ``address`` when given), so a strategy that accepts those can place runners
    without a training driver.
    """


@hookspec
def agl_register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``agl`` command line (a :class:`click.Group`).

    *Added in contract 1 (agl 0.4.0).*

    Example::

        import click
        from agl_core import hookimpl

        @hookimpl
        def agl_register_commands(cli):
            @cli.command(name="hello")
            @click.argument("name")
            def hello(name):
                '''Say hello.'''
                click.echo(f"Hello, {name}!")

    Keep heavy imports inside the command function so ``agl --help`` stays fast.
    """
