"""The whole agl plugin contract: seven registration hooks.

A plugin is a module (or object) with functions decorated by :data:`agl_core.hookimpl` whose names
are the hooks below. It is found through an entry point in group ``agl``::

    [project.entry-points.agl]
    redis = "agl_redis.hooks"

Each hook receives a registry and adds named implementations to it. Targets are ``"module:attr"``
strings that are imported only when the implementation is first used, so discovering plugins
never imports heavy backends. A hook implementation may accept fewer arguments than the spec
(pluggy's opt-in arguments), which lets specs gain parameters without breaking plugins.

Nothing else lives in this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import click

    from agl_core.registry import Registry

PROJECT_NAME = "agl"
"""The pluggy project name and the entry-point group."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def agl_register_algorithms(registry: Registry[Any]) -> None:
    """Add :class:`~agl_core.Algorithm` implementations.

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


@hookspec
def agl_register_runners(registry: Registry[Any]) -> None:
    """Add :class:`~agl_core.Runner` implementations.

    Example::

        from agl_core import hookimpl

        @hookimpl
        def agl_register_runners(registry):
            registry.add("sandboxed", "agl_sandbox.runner:SandboxedRunner",
                         summary="Runs each rollout in a fresh container")

    Users then pick it by name: ``Trainer(runner="sandboxed")``.
    """


@hookspec
def agl_register_tracers(registry: Registry[Any]) -> None:
    """Add :class:`~agl_core.Tracer` implementations.

    Example::

        from agl_core import hookimpl

        @hookimpl
        def agl_register_tracers(registry):
            registry.add("agentops", "agl_agentops.tracer:AgentOpsTracer",
                         summary="AgentOps-instrumented tracer", requires=["agentops>=0.4"])

    Users then pick it by name: ``Trainer(tracer="agentops")``.
    """


@hookspec
def agl_register_adapters(registry: Registry[Any]) -> None:
    """Add :class:`~agl_core.Adapter` implementations (spans to training data).

    Example::

        from agl_core import hookimpl

        @hookimpl
        def agl_register_adapters(registry):
            registry.add("trajectories", "agl_traj.adapter:TraceToTrajectory",
                         summary="Whole-trajectory samples with token masks")

    Users then pick it by name: ``Trainer(adapter="trajectories")``.
    """


@hookspec
def agl_register_stores(registry: Registry[Any]) -> None:
    """Add :class:`~agl_core.LightningStore` implementations and the URI schemes they open.

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


@hookspec
def agl_register_strategies(registry: Registry[Any]) -> None:
    """Add :class:`~agl_core.execution.ExecutionStrategy` implementations (how runners are laid out).

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
