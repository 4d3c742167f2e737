"""`agl plugins list/check` and plugin subcommands, in-process."""

from __future__ import annotations

import click

import agl_core
from agl_core import hookimpl
from agl_core.plugins import PluginManager
from agl_testing import fake_entry_point, plugin_module, records_by_name, run_cli

RECORD_KEYS = {
    "schema_version",
    "name",
    "distribution",
    "version",
    "status",
    "builtin",
    "hooks",
    "provides",
    "error",
    "disabled_reason",
    "load_seconds",
    "api_version",
    "api_mismatch",
}


def _manager_with_plugins() -> PluginManager:
    @hookimpl
    def agl_register_algorithms(registry):
        registry.add("shiny", "agl_shiny.algo:Shiny", summary="a shiny algorithm")
        registry.add("heavy", "agl_shiny.heavy:Heavy", requires=["agl-not-installed-backend>=1"])

    @hookimpl
    def agl_register_commands(cli):
        @cli.command(name="shine")
        @click.argument("what")
        def shine(what):
            """Make WHAT shine."""
            click.echo(f"{what} shines")

    def broken():
        raise ModuleNotFoundError("No module named 'verl'", name="verl")

    manager = PluginManager(strict=False)
    manager.load_entrypoints(
        [
            fake_entry_point(
                "shiny",
                plugin_module(
                    "shiny",
                    agl_register_algorithms=agl_register_algorithms,
                    agl_register_commands=agl_register_commands,
                ),
                distribution="agl-shiny",
                version="1.2.3",
            ),
            fake_entry_point("verl", broken, distribution="agl-verl", version="0.4.0"),
        ]
    )
    return manager


def test_version() -> None:
    result = run_cli("--version")
    assert result.exit_code == 0
    assert result.output.strip() == f"agl {agl_core.__version__}"


def test_list_json_records() -> None:
    result = run_cli("plugins", "list", "--json", manager=_manager_with_plugins())
    assert result.exit_code == 0
    records = records_by_name(result.json())
    assert set(records) == {"shiny", "verl"}
    for record in records.values():
        assert set(record) == RECORD_KEYS
    shiny = records["shiny"]
    assert (shiny["distribution"], shiny["version"], shiny["status"]) == ("agl-shiny", "1.2.3", "ok")
    provides = {(p["kind"], p["name"]): p for p in shiny["provides"]}
    assert provides[("algorithm", "shiny")]["available"] is True
    assert provides[("algorithm", "heavy")]["missing"] == ["agl-not-installed-backend>=1"]
    assert ("command", "shine") in provides
    verl = records["verl"]
    assert verl["status"] == "failed"
    assert verl["error"]["stage"] == "import"
    assert verl["error"]["type"] == "ModuleNotFoundError"


def test_list_all_includes_builtins() -> None:
    records = records_by_name(run_cli("plugins", "list", "--json", "--all").json())
    assert records["core"]["builtin"] is True
    assert records["core"]["distribution"] == "agl-core"


def test_list_table_explains_failures() -> None:
    result = run_cli("plugins", "list", manager=_manager_with_plugins())
    assert result.exit_code == 0  # listing is a diagnostic
    lines = result.output.splitlines()
    assert lines[0].split() == ["Name", "Distribution", "Version", "Status", "Load", "Provides"]
    assert any(line.startswith("shiny") and "algorithm:shiny" in line for line in lines)
    assert "1 plugin failed to load:" in result.output
    assert "verl (agl-verl 0.4.0) at import: ModuleNotFoundError" in result.output
    assert "hint: install the distribution that provides the module 'verl'" in result.output
    assert "`agl --debug plugins list` prints the traceback" in result.output
    assert "algorithm heavy (agl-shiny) needs agl-not-installed-backend>=1" in result.output


def test_check_exit_codes() -> None:
    assert run_cli("plugins", "check", manager=_manager_with_plugins()).exit_code == 1
    assert run_cli("plugins", "check").exit_code == 0


def test_check_fails_on_unmet_requirement_alone() -> None:
    @hookimpl
    def agl_register_stores(registry):
        registry.add("needy", "agl_needy.store:Needy", requires=["agl-needy-backend"])

    manager = PluginManager(strict=False)
    manager.register(plugin_module("needy", agl_register_stores=agl_register_stores), name="needy")
    result = run_cli("plugins", "check", manager=manager)
    assert result.exit_code == 1
    assert "store needy (needy) needs agl-needy-backend" in result.output


def test_plugin_subcommand_runs() -> None:
    result = run_cli("shine", "gold", manager=_manager_with_plugins())
    assert result.exit_code == 0
    assert result.output.strip() == "gold shines"


def test_failing_command_hook_is_isolated() -> None:
    @hookimpl
    def agl_register_commands(cli):
        @cli.command(name="half-added")
        def half_added():
            """Never reachable."""

        raise RuntimeError("cannot build commands")

    manager = PluginManager(strict=False)
    manager.register(plugin_module("cmds", agl_register_commands=agl_register_commands), name="cmds")
    result = run_cli("--help", manager=manager)
    assert result.exit_code == 0
    assert "half-added" not in result.output
    assert "plugins" in result.output
    record = manager.record("cmds")
    assert record.status == "failed"
    assert record.error is not None and record.error.stage == "agl_register_commands"


def _versioned_plugin(name: str, declared: object) -> object:
    @hookimpl
    def agl_register_algorithms(registry):
        registry.add(f"{name}-algo", "agl_core.algorithm.baseline:Baseline")

    module = plugin_module(name, agl_register_algorithms=agl_register_algorithms)
    if declared is not None:
        module.AGL_PLUGIN_API_VERSION = declared  # type: ignore[attr-defined]
    return module


def test_check_reports_a_plugin_built_for_another_contract_version() -> None:
    from agl_core import PLUGIN_API_VERSION

    manager = PluginManager(strict=False)
    manager.register(_versioned_plugin("current", PLUGIN_API_VERSION), name="current")
    manager.register(_versioned_plugin("silent", None), name="silent")
    ok = run_cli("plugins", "check", manager=manager)
    assert ok.exit_code == 0, ok.output
    manager.register(_versioned_plugin("future", PLUGIN_API_VERSION + 1), name="future", distribution="agl-f")
    manager.register(_versioned_plugin("odd", "one"), name="odd")
    result = run_cli("plugins", "check", manager=manager)
    assert result.exit_code == 1
    assert f"future (agl-f ?) was built for plugin contract {PLUGIN_API_VERSION + 1}" in result.output
    assert "upgrade agl-core" in result.output
    assert "odd (? ?) declares AGL_PLUGIN_API_VERSION = 'one'; it must be an integer" in result.output
    records = records_by_name(run_cli("plugins", "list", "--json", manager=manager).json())
    assert (records["current"]["api_version"], records["current"]["api_mismatch"]) == (
        PLUGIN_API_VERSION,
        None,
    )
    assert records["silent"]["api_version"] is None and records["silent"]["api_mismatch"] is None
    assert "upgrade agl-core" in records["future"]["api_mismatch"]


def test_an_older_plugin_is_told_to_upgrade() -> None:
    from agl_core.plugins import PluginRecord

    record = PluginRecord(name="old", api_version=0)
    assert record.api_mismatch is not None and "upgrade the plugin" in record.api_mismatch
    assert PluginRecord(name="core", builtin=True, api_version=0).api_mismatch is None
