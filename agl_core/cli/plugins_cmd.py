"""``agl plugins``: see which plugins are installed, what they provide, and what is broken."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import click

from agl_core.cli.errors import debug_enabled
from agl_core.hookspecs import PLUGIN_API_VERSION
from agl_core.plugins import PluginManager, PluginRecord
from agl_core.registry import install_command

RECORD_SCHEMA_VERSION = 1
"""Version of the ``agl plugins list --json`` record schema (documented in docs/plugins.md)."""


def plugin_record_json(manager: PluginManager, record: PluginRecord) -> dict[str, Any]:
    """The stable JSON record of one plugin."""
    return {
        "schema_version": RECORD_SCHEMA_VERSION,
        "name": record.name,
        "distribution": record.distribution,
        "version": record.version,
        "status": record.status,
        "builtin": record.builtin,
        "hooks": list(record.hooks),
        "provides": manager.provides(record.name),
        "error": record.error.to_json() if record.error else None,
        "disabled_reason": record.disabled_reason,
        "load_seconds": None if record.load_seconds is None else round(record.load_seconds, 4),
        "api_version": record.api_version if isinstance(record.api_version, int) else None,
        "api_mismatch": record.api_mismatch,
    }


def _load_all(ctx: click.Context) -> PluginManager:
    """Load every installed plugin (and its commands) before listing or checking them."""
    root = ctx.find_root().command
    loader = getattr(root, "load_plugin_commands", None)
    manager: PluginManager = ctx.obj
    if callable(loader):
        loader()
    else:
        manager.ensure_entrypoints()
    return manager


def _load_time(record: PluginRecord) -> str:
    if record.load_seconds is None:
        return "-"
    return (
        f"{record.load_seconds * 1000:.0f} ms" if record.load_seconds < 1 else f"{record.load_seconds:.1f} s"
    )


def _provides_text(items: list[dict[str, Any]]) -> str:
    if not items:
        return "-"
    parts = []
    for item in items:
        label = f"{item['kind']}:{item['name']}"
        if item.get("missing"):
            label += " (needs " + ", ".join(item["missing"]) + ")"
        parts.append(label)
    return ", ".join(parts)


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for index, row in enumerate(rows):
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        lines.append("  ".join(cells).rstrip())
        if index == 0:
            lines.append("-" * len(lines[0]))
    return "\n".join(lines)


@click.group(name="plugins")
def plugins_group() -> None:
    """Inspect installed agl plugins."""


@plugins_group.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON records (schema in docs/plugins.md).")
@click.option("--all", "show_all", is_flag=True, help="Include the core's built-in components.")
@click.pass_context
def list_plugins(ctx: click.Context, as_json: bool, show_all: bool) -> None:
    """List plugins: name, distribution, version, status, load time and what each provides.

    With 'agl --debug plugins list', a failed plugin's traceback follows its error.
    """
    manager = _load_all(ctx)
    records = [r for r in manager.records() if show_all or not r.builtin]
    if as_json:
        click.echo(json.dumps([plugin_record_json(manager, r) for r in records], indent=2))
        return
    if not records:
        click.echo("No agl plugins installed. (Use --all to see the core's built-in components.)")
        return
    rows = [["Name", "Distribution", "Version", "Status", "Load", "Provides"]]
    for r in records:
        status = r.status if r.status != "disabled" else f"disabled ({r.disabled_reason})"
        rows.append(
            [
                r.name,
                r.distribution or "-",
                r.version or "-",
                status,
                _load_time(r),
                _provides_text(manager.provides(r.name)),
            ]
        )
    click.echo(_table(rows))
    _echo_problems(manager, records, debug=debug_enabled(ctx))


def _echo_problems(manager: PluginManager, records: list[PluginRecord], *, debug: bool = False) -> int:
    failed = [r for r in records if r.status == "failed"]
    unmet = [
        (r, item)
        for r in records
        if r.status == "ok"
        for item in manager.provides(r.name)
        if item.get("missing")
    ]
    if failed:
        click.echo("")
        click.echo(f"{len(failed)} plugin{'s' if len(failed) > 1 else ''} failed to load:")
        for r in failed:
            assert r.error is not None
            click.echo(
                f"  {r.name} ({r.distribution or '?'} {r.version or '?'}) at {r.error.stage}: "
                f"{r.error.type}: {r.error.message}"
            )
            if r.error.hint:
                click.echo(f"    hint: {r.error.hint}")
            if debug:
                click.echo(textwrap.indent(r.error.traceback.rstrip(), "    "))
    mismatched = [r for r in records if r.status == "ok" and r.api_mismatch]
    if mismatched:
        click.echo("")
        click.echo(f"Plugins built for another plugin contract (this agl-core speaks {PLUGIN_API_VERSION}):")
        for r in mismatched:
            click.echo(f"  {r.name} ({r.distribution or '?'} {r.version or '?'}) {r.api_mismatch}")
    if unmet:
        click.echo("")
        click.echo("Components whose requirements are not installed:")
        for r, item in unmet:
            needs = ", ".join(item["missing"])
            dist = r.distribution or r.name
            click.echo(f"  {item['kind']} {item['name']} ({dist}) needs {needs}")
            click.echo(f"    hint: {install_command(r.distribution, item['missing'])}")
    return len(failed) + len(unmet) + len(mismatched)


@plugins_group.command(name="check")
@click.pass_context
def check_plugins(ctx: click.Context) -> None:
    """Exit 1 on any plugin problem (for CI).

    A problem is a plugin that failed to load, a component that cannot be imported or is not of its kind,
    a requirement that is not installed, or a plugin built for another contract version.

    Every registered component whose requirements are installed is imported and checked against its
    kind's base class.
    """
    manager = _load_all(ctx)
    records = manager.records()
    problems = _echo_problems(manager, records, debug=debug_enabled(ctx))
    broken = manager.check_targets()
    if broken:
        click.echo("")
        click.echo("Components that cannot be built:")
        for item in broken:
            click.echo(
                f"  {item.kind} {item.name} (plugin {item.plugin}, {item.distribution or '?'}): "
                f"{item.message}"
            )
    problems += len(broken)
    plugins = [r for r in records if not r.builtin]
    ok = sum(1 for r in plugins if r.status == "ok")
    disabled = sum(1 for r in plugins if r.status == "disabled")
    components = sum(len(registry) for registry in manager.registries.all())
    if problems:
        click.echo(f"\nplugins check: {problems} problem(s) found.", err=True)
        raise SystemExit(1)
    installed = f"{ok} plugin(s) ok, {disabled} disabled" if plugins else "no agl plugins installed"
    click.echo(
        f"plugins check: {installed}; all {components} components (the core's included) import and are "
        "of their kind; no problems."
    )


@plugins_group.command(name="new")
@click.argument("name")
@click.option(
    "--kind",
    required=True,
    type=click.Choice(["store", "algorithm", "tracer", "adapter", "runner", "command"]),
    help="The component the plugin provides.",
)
@click.option(
    "--directory",
    "-d",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to write the distribution (default: ./agl-NAME); must not exist.",
)
def new_plugin(name: str, kind: str, directory: Path | None) -> None:
    """Generate a ready plugin distribution NAME (pyproject, hooks, skeleton, tests, README)."""
    from agl_core.cli.errors import AglUserError
    from agl_core.cli.scaffold import generate_plugin, plugin_names

    try:
        names = plugin_names(name)
        target = directory if directory is not None else Path(names.dist)
        generate_plugin(name, kind, target)
    except ValueError as exc:
        raise AglUserError(str(exc)) from exc
    except FileExistsError as exc:
        raise AglUserError(str(exc), hint="pass --directory to write somewhere else") from exc
    click.echo(f"Created {names.dist} ({kind} '{names.name}') in {target}.")
    click.echo(f"Next: pip install -e '{target}[test]' && agl plugins check && pytest {target}")
