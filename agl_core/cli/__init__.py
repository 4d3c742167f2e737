"""The ``agl`` command line. Plugins add subcommands through ``agl_register_commands``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from agl_core import __version__
from agl_core.plugins import PluginManager, get_plugin_manager


def build_cli(manager: PluginManager | None = None) -> click.Group:
    """Build the ``agl`` click group with every healthy plugin's subcommands."""

    @click.group(
        name="agl",
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )
    @click.version_option(__version__, "--version", "-V", prog_name="agl", message="%(prog)s %(version)s")
    @click.pass_context
    def cli(ctx: click.Context) -> None:
        """agl: train and optimize AI agents with almost no change to their code."""
        ctx.obj = pm

    pm = manager if manager is not None else get_plugin_manager()
    pm.add_commands(cli)
    return cli


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``agl`` console script."""
    cli = build_cli()
    cli.main(args=list(argv) if argv is not None else sys.argv[1:], prog_name="agl")
