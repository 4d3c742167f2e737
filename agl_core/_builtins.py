"""The core's own components, registered through the same hooks as any plugin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agl_core.hookspecs import PLUGIN_API_VERSION, hookimpl

if TYPE_CHECKING:
    import click

    from agl_core.registry import Registry

AGL_PLUGIN_API_VERSION = PLUGIN_API_VERSION
"""The built-ins always speak the core's own contract."""


@hookimpl
def agl_register_stores(registry: Registry[Any]) -> None:
    """Built-in stores: in-memory, SQLite and the HTTP client of ``agl store serve``."""
    registry.add(
        "memory",
        "agl_core.store.memory:InMemoryLightningStore",
        summary="In-process store (threads and asyncio); the default for one-process runs",
        schemes=["memory"],
    )
    registry.add(
        "sqlite",
        "agl_core.store.sqlite:SqliteLightningStore",
        summary="Durable single-file store (WAL); the default for `agl store serve`",
        schemes=["sqlite"],
    )
    registry.add(
        "http",
        "agl_core.store.http.client:LightningStoreClient",
        summary="Client of `agl store serve` (many runners, many machines)",
        schemes=["http", "https"],
    )


BUILTIN_COMMANDS: dict[str, tuple[str, str]] = {
    "plugins": ("agl_core.cli.plugins_cmd:plugins_group", "Inspect installed agl plugins."),
    "proxy": (
        "agl_core.cli.proxy_cmd:proxy_group",
        "Run the LLM proxy that records exact token ids per rollout.",
    ),
    "doctor": (
        "agl_core.cli.doctor_cmd:doctor_command",
        "Explain the training data ROLLOUT_ID yields: spans, triplets, rewards, and each problem with a fix.",
    ),
    "runner": (
        "agl_core.cli.runner_cmd:runner_command",
        "Run agent runners against a store served elsewhere, until Ctrl-C.",
    ),
    "store": (
        "agl_core.cli.store_cmd:store_group",
        "Run and inspect the LightningStore server.",
    ),  # 0.3's forms: agl-legacy
    "rollout": (
        "agl_core.cli.rollout_cmd:rollout_group",
        "Create rollouts for agents that run outside agl (a CLI, a program in another language).",
    ),
    "reward": (
        "agl_core.cli.reward_cmd:reward_command",
        "Report VALUE as the reward of the current rollout (a program agent's, or one named by ids).",
    ),
}
"""Built-in subcommands: name -> (``module:attr`` of the click command, its short help in ``agl --help``)."""


@hookimpl
def agl_register_commands(cli: click.Group) -> None:
    """Built-in ``agl`` subcommands, imported when they run (``agl --help`` imports none of them)."""
    from agl_core.lazy_command import LazyCommand

    for name, (target, short_help) in BUILTIN_COMMANDS.items():
        cli.add_command(LazyCommand(name, target, short_help))


@hookimpl
def agl_register_tracers(registry: Registry[Any]) -> None:
    """Built-in tracers: OpenTelemetry (the default) and the backend-less dummy."""
    registry.add(
        "otel",
        "agl_core.tracer.otel:OtelTracer",
        summary="OpenTelemetry SDK tracer streaming spans to the store; traces openai calls",
    )
    registry.add(
        "dummy",
        "agl_core.tracer.dummy:DummyTracer",
        summary="No backend: builds span records without exporting them",
    )


@hookimpl
def agl_register_adapters(registry: Registry[Any]) -> None:
    """Built-in adapters: spans to triplets (tracer, LLM proxy) and spans to chat messages."""
    registry.add(
        "triplet",
        "agl_core.adapter.triplet:TracerTraceToTriplet",
        summary="Tracer spans -> (prompt, response, reward) triplets; agent_match, reward policies",
    )
    registry.add(
        "proxy-triplet",
        "agl_core.adapter.proxy_triplet:LlmProxyTraceToTriplet",
        summary="LLM-proxy spans (exact token ids) joined with tracer agents -> triplets",
    )
    registry.add(
        "messages",
        "agl_core.adapter.messages:TraceToMessages",
        summary="LLM spans -> OpenAI fine-tuning samples (messages + tools)",
    )


@hookimpl
def agl_register_runners(registry: Registry[Any]) -> None:
    """Built-in runner: LitAgentRunner."""
    registry.add(
        "litagent",
        "agl_core.runner.agent:LitAgentRunner",
        summary="Runs a LitAgent on rollouts from the store: tracing, hooks, heartbeats, timeouts",
    )


@hookimpl
def agl_register_algorithms(registry: Registry[Any]) -> None:
    """Built-in algorithm: Baseline."""
    registry.add(
        "baseline",
        "agl_core.algorithm.baseline:Baseline",
        summary="Runs every sample once per epoch without training; the default of Trainer.dev()",
    )


@hookimpl
def agl_register_strategies(registry: Registry[Any]) -> None:
    """Built-in execution strategies: threads of one process (shm) and client-server processes (cs)."""
    registry.add(
        "shm",
        "agl_core.execution.shared_memory:SharedMemoryExecutionStrategy",
        summary="Algorithm and runners as threads of one process sharing one store object",
    )
    registry.add(
        "cs",
        "agl_core.execution.client_server:ClientServerExecutionStrategy",
        summary="The algorithm serves the store over HTTP; runners are processes (here or `agl runner`)",
    )
