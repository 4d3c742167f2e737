"""Agent Lightning 0.3's ``agl`` command forms: ``agl store --port N``, ``agl vllm``, ``agl prometheus``,
``agl agentops`` (compatibility; see docs/migrating-from-agent-lightning.md).

* ``agl store [--host --port --cors-origin --log-level --backend --mongo-uri]`` without a subcommand
  serves a store as 0.3 did (host 0.0.0.0, port 4747, in-memory backend); it runs ``agl store serve``.
* ``agl vllm ARGS...`` runs vLLM's own command line (``agl vllm serve MODEL``). 0.3 patched vLLM first so
  responses carried token ids; vLLM >= 0.10.2 returns them itself and agl's LLM proxy records them.
* ``agl prometheus`` and ``agl agentops`` exit with status 1 and a message naming what replaces them
  (for ``agl prometheus``: ``GET /metrics`` on ``agl store serve`` and ``agl proxy serve``).
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Callable
from typing import Any

import click

__all__ = [
    "agentops_command",
    "legacy_store_command",
    "legacy_store_options",
    "prometheus_command",
    "run_legacy_store",
    "vllm_command",
]

LEGACY_MONGO_URI = "mongodb://localhost:27017/?replicaSet=rs0"
"""0.3's default ``--mongo-uri``."""


def legacy_store_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """Add 0.3's ``agl store`` options to the ``store`` group (used only when no subcommand follows)."""
    options = [
        click.option(
            "--host", "legacy_host", default="0.0.0.0", show_default=True, help="0.3 form: interface."
        ),
        click.option("--port", "legacy_port", type=click.IntRange(0, 65535), default=4747, show_default=True),
        click.option("--cors-origin", "legacy_cors", multiple=True, help="0.3 form: allowed browser origin."),
        click.option(
            "--log-level",
            "legacy_log_level",
            default="INFO",
            type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
        ),
        click.option("--tracker", "legacy_tracker", multiple=True, hidden=True),
        click.option("--n-workers", "legacy_n_workers", type=int, default=1, hidden=True),
        click.option("--backend", "legacy_backend", type=click.Choice(["memory", "mongo"]), default="memory"),
        click.option("--mongo-uri", "legacy_mongo_uri", default=LEGACY_MONGO_URI, show_default=True),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def run_legacy_store(ctx: click.Context, **options: Any) -> None:
    """Serve a store with 0.3's ``agl store`` options by running ``agl store serve``."""
    from agl_core.cli.serving import configure_logging
    from agl_core.cli.store_cmd import serve

    if options["legacy_tracker"]:
        raise click.UsageError(
            "--tracker is not supported by agl (no metrics backends): read GET /v1/agl/statistics instead."
        )
    if options["legacy_n_workers"] != 1:
        raise click.UsageError("--n-workers is not supported by agl: one aiohttp process serves all clients.")
    uri = "memory:" if options["legacy_backend"] == "memory" else options["legacy_mongo_uri"]
    configure_logging(options["legacy_log_level"])  # what `agl store serve --log-level` does
    ctx.invoke(
        serve,
        store_uri=uri,
        host=options["legacy_host"],
        port=options["legacy_port"],
        token=None,
        cors_origins=tuple(options["legacy_cors"]),
        max_body_bytes=32 * 1024 * 1024,
    )


@click.command(name="store")
@legacy_store_options
@click.pass_context
def legacy_store_command(ctx: click.Context, /, **options: Any) -> None:
    """Serve a store with 0.3's options (``agl store --port 4747``), as ``agl store serve`` does."""
    run_legacy_store(ctx, **options)


@click.command(name="vllm", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def vllm_command(args: tuple[str, ...]) -> None:
    """Run vLLM's own command line, as Agent Lightning 0.3 did: ``agl vllm serve MODEL``."""
    try:
        import vllm  # noqa: F401
    except ImportError:
        click.echo(
            "error: vLLM is not installed (pip install 'vllm>=0.10.2'). agl needs no vLLM patch: "
            "vLLM >= 0.10.2 returns token ids itself and `agl proxy` records them.",
            err=True,
        )
        sys.exit(1)
    sys.argv = ["vllm", *args]
    runpy.run_module("vllm.entrypoints.cli.main", run_name="__main__")


@click.command(name="prometheus", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def prometheus_command(args: tuple[str, ...]) -> None:
    """Agent Lightning 0.3's separate Prometheus exporter; agl's servers export their own (prints where)."""
    click.echo(
        "error: agl needs no separate Prometheus exporter: `agl store serve` and `agl proxy serve` each "
        "serve GET /metrics (Prometheus text format; send the server's bearer token when it has one). "
        "Scrape those instead. Store counters as JSON: GET /v1/agl/statistics. See docs/metrics.md.",
        err=True,
    )
    sys.exit(1)


@click.command(name="agentops", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def agentops_command(args: tuple[str, ...]) -> None:
    """Agent Lightning 0.3 listed this command but had removed it; prints what to use."""
    click.echo(
        "error: `agl agentops` was already gone in Agent Lightning 0.3 (its module was deleted). For "
        "AgentOps tracing install the plugin (pip install agl-agentops) and use AgentOpsTracer; no local "
        "AgentOps server is needed.",
        err=True,
    )
    sys.exit(1)
