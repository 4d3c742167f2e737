"""The ``agl`` command line. Plugins add subcommands through ``agl_register_commands``.

Built-in subcommands need no third-party import: plugins are loaded only when a command name is
not a built-in one (or by ``agl plugins list/check``). Errors are reported by
:mod:`agl_core.cli.errors`: one or two lines and a distinct exit code, a traceback only with
``--debug`` or ``AGL_DEBUG=1``.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from typing import Any

import click

from agl_core import __version__
from agl_core.cli.errors import AglUserError, ExitCode, debug_enabled, user_error_from
from agl_core.lazy_command import LazyCommand
from agl_core.plugins import ENTRY_POINT_GROUP, PluginManager, get_plugin_manager
from agl_core.registry import FIRST_PARTY_COMMANDS

__all__ = ["AglGroup", "AglUserError", "ExitCode", "build_cli", "main"]


class AglGroup(click.Group):
    """The ``agl`` group: loads plugin commands on demand and turns errors into short messages."""

    def __init__(self, *args: Any, manager: PluginManager, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.manager = manager

    def load_plugin_commands(self) -> None:
        """Load third-party plugins (if not yet) and add their subcommands."""
        self.manager.ensure_entrypoints()
        self.manager.add_commands(self)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """A built-in command, else one a plugin adds (plugins are loaded on this first miss)."""
        command = super().get_command(ctx, cmd_name)
        if command is None:
            self.load_plugin_commands()
            command = super().get_command(ctx, cmd_name)
        if isinstance(command, LazyCommand):
            command = self.commands[cmd_name] = command.load()
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List the subcommands by their short help, importing none of them."""
        rows = [
            (name, command.get_short_help_str(formatter.width - 6 - max(map(len, self.commands))))
            for name, command in sorted(self.commands.items())
            if not command.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """Find the subcommand; an unknown one names the plugins that failed to load (one may provide it)."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            note = self.manager.failure_note(args[0]) if args else None
            if note is None and args and args[0] in FIRST_PARTY_COMMANDS:
                dist = FIRST_PARTY_COMMANDS[args[0]]
                note = f"`agl {args[0]}` is provided by the {dist} plugin: pip install {dist}"
            if note is None:
                raise
            raise click.UsageError(f"{exc.format_message()} {note}", ctx=exc.ctx) from exc

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Name the installed plugins whose commands are not loaded yet (without importing them)."""
        super().format_epilog(ctx, formatter)
        if self.manager.entrypoints_loaded:
            return
        names = _installed_plugin_names()
        if names:
            with formatter.section("Plugins"):
                formatter.write_text(
                    f"Installed: {', '.join(names)}. Their commands load on first use; "
                    "`agl plugins list` shows what each provides."
                )

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a known failure becomes an :class:`AglUserError`, others a one-line bug report."""
        try:
            return super().invoke(ctx)
        except click.ClickException:
            if debug_enabled(ctx):
                traceback.print_exc()
            raise
        except (click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            if debug_enabled(ctx):
                raise
            error = user_error_from(exc)
            if error is None:
                error = AglUserError(
                    f"internal error: {type(exc).__name__}: {exc}",
                    hint="rerun with --debug (or AGL_DEBUG=1) for the traceback, and please report it",
                    exit_code=ExitCode.INTERNAL,
                )
            raise error from exc


def _installed_plugin_names() -> list[str]:
    from importlib.metadata import entry_points

    names: set[str] = set()
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        names.add(getattr(dist, "name", None) or ep.name)
    return sorted(names)


def build_cli(manager: PluginManager | None = None) -> click.Group:
    """Build the ``agl`` click group: the built-in subcommands plus those of plugins already loaded."""

    @click.group(
        name="agl",
        cls=AglGroup,
        manager=manager if manager is not None else get_plugin_manager(),
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )
    @click.version_option(__version__, "--version", "-V", prog_name="agl", message="%(prog)s %(version)s")
    @click.option("--debug", is_flag=True, help="Show full tracebacks for errors (same as AGL_DEBUG=1).")
    @click.pass_context
    def cli(ctx: click.Context, debug: bool) -> None:
        """agl: train and optimize AI agents with almost no change to their code."""
        ctx.meta["agl.debug"] = debug
        ctx.obj = pm

    assert isinstance(cli, AglGroup)
    pm = cli.manager
    pm.add_commands(cli)
    return cli


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``agl`` console script."""
    cli = build_cli()
    cli.main(args=list(argv) if argv is not None else sys.argv[1:], prog_name="agl")
