"""`agl --help` stays fast: it lists the built-in commands without importing them (issue 39)."""

from __future__ import annotations

import json
import subprocess
import sys

import click

from agl_core._builtins import BUILTIN_COMMANDS
from agl_core.cli import build_cli
from agl_core.lazy_command import LazyCommand, plain_help
from agl_core.plugins import PluginManager

HEAVY_PREFIXES = (
    "agl_core.store",
    "agl_core.types",
    "agl_core.cli.store_cmd",
    "pydantic",
    "aiohttp",
    "asyncio",
)


def test_help_imports_no_command_module_and_no_store_layer() -> None:
    code = (
        "import json, sys\n"
        "from agl_core.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "store" in done.stdout and "plugins" in done.stdout
    modules = json.loads(done.stderr.strip().splitlines()[-1])
    heavy = [m for m in modules if m.startswith(HEAVY_PREFIXES) or m.endswith("_cmd")]
    assert not heavy, heavy


def test_each_listed_short_help_is_the_commands_own() -> None:
    for name, (target, short_help) in BUILTIN_COMMANDS.items():
        real = LazyCommand(name, target, short_help).load()
        assert real.name == name
        assert plain_help(real.get_short_help_str(limit=200)) == short_help, name


def test_help_texts_show_no_restructuredtext() -> None:
    cli = build_cli(PluginManager(strict=False))
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None and not isinstance(command, LazyCommand)
        text = command.get_help(click.Context(command, info_name=name, parent=ctx))
        assert "``" not in text and ":class:" not in text, (name, text)
