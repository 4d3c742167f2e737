"""Common plugin-author bugs fail loudly: `agl plugins check` (the CI gate) exits 1 naming each (issue 39).

A hook that returns its value instead of calling the registry, a command named like a built-in, a
target whose module does not exist or whose class is the wrong kind; and a failed plugin that would have
provided a command or a store scheme is named where the user meets the miss.
"""

from __future__ import annotations

import click
import pytest

from agl_core import hookimpl
from agl_core.errors import UnknownComponentError
from agl_core.plugins import PluginManager
from agl_core.store.memory import InMemoryLightningStore
from agl_testing import fake_entry_point, plugin_module, run_cli


class GoodStore(InMemoryLightningStore):
    """A store plugin's store (a real one, so only the broken entries are problems)."""


class NotAStore:
    """A class that is not a LightningStore."""


def _registered(name: str, **hooks: object) -> PluginManager:
    manager = PluginManager(strict=False)
    manager.register(plugin_module(name, **hooks), name=name, distribution=f"agl-{name}")
    return manager


def test_a_hook_that_returns_its_components_fails_the_plugin() -> None:
    @hookimpl
    def agl_register_stores(registry):
        return [("returned", GoodStore)]  # the bug: a list returned, registry.add never called

    manager = _registered("returner", agl_register_stores=agl_register_stores)
    record = manager.record("returner")
    assert record.status == "failed" and record.error is not None
    assert record.error.stage == "agl_register_stores"
    assert "returned a list instead of calling registry.add(...)" in record.error.message
    result = run_cli("plugins", "check", manager=manager)
    assert result.exit_code == 1
    assert "returner (agl-returner ?) at agl_register_stores" in result.output


def test_a_command_hook_that_returns_its_command_fails_the_plugin() -> None:
    @click.command(name="shout")
    def shout() -> None:
        """Shout."""

    @hookimpl
    def agl_register_commands(cli):
        return shout

    manager = _registered("cmdreturner", agl_register_commands=agl_register_commands)
    result = run_cli("plugins", "check", manager=manager)
    assert result.exit_code == 1
    assert "returned a Command instead of calling cli.add_command(...)" in result.output


def test_a_plugin_command_named_like_a_builtin_fails_and_the_builtin_stays() -> None:
    @click.command(name="store")
    def fake_store() -> None:
        """Not the store command."""
        click.echo("hijacked")

    @hookimpl
    def agl_register_commands(cli):
        cli.add_command(fake_store)

    manager = _registered("hijacker", agl_register_commands=agl_register_commands)
    result = run_cli("plugins", "check", manager=manager)
    assert result.exit_code == 1
    assert "adds the command(s) 'store' (built in), which already exist" in result.output
    help_text = run_cli("store", "--help", manager=manager)
    assert help_text.exit_code == 0 and "serve" in help_text.output  # the built-in store group
    assert "Not the store command" not in help_text.output


def test_check_imports_every_target_and_checks_its_kind() -> None:
    @hookimpl
    def agl_register_stores(registry):
        registry.add("good", f"{__name__}:GoodStore", schemes=["good"])
        registry.add("nomodule", "agl_no_such_module_here.store:Store")
        registry.add("noattr", f"{__name__}:NoSuchStore")
        registry.add("wrongkind", f"{__name__}:NotAStore")
        registry.add("notcallable", f"{__name__}:__doc__")

    manager = _registered("sloppy", agl_register_stores=agl_register_stores)
    assert manager.record("sloppy").status == "ok"  # registration itself imports nothing
    problems = {p.name: p.message for p in manager.check_targets()}
    assert set(problems) == {"nomodule", "noattr", "wrongkind", "notcallable"}
    assert "No module named 'agl_no_such_module_here'" in problems["nomodule"]
    assert "NoSuchStore" in problems["noattr"]
    assert "not a agl_core.store.base.LightningStore subclass" in problems["wrongkind"]
    assert "is a str, not a class or a factory" in problems["notcallable"]
    result = run_cli("plugins", "check", manager=manager)
    assert result.exit_code == 1
    assert "Components that cannot be built:" in result.output
    assert "store wrongkind (plugin sloppy, agl-sloppy)" in result.output


def test_check_passes_a_correct_plugin_and_says_what_it_checked() -> None:
    @hookimpl
    def agl_register_stores(registry):
        registry.add("good", f"{__name__}:GoodStore", schemes=["good"])

    result = run_cli("plugins", "check", manager=_registered("fine", agl_register_stores=agl_register_stores))
    assert result.exit_code == 0, result.output
    assert "1 plugin(s) ok" in result.output and "import and are of their kind" in result.output


def test_list_and_check_agree_on_a_bare_install() -> None:
    assert "No agl plugins installed" in run_cli("plugins", "list").output
    assert "no agl plugins installed" in run_cli("plugins", "check").output


def _failed_manager() -> PluginManager:
    def broken() -> object:
        raise ModuleNotFoundError("No module named 'redis'", name="redis")

    manager = PluginManager(strict=False)
    manager.load_entrypoints([fake_entry_point("redis", broken, distribution="agl-redis")])
    return manager


def test_an_unknown_command_names_the_failed_plugin_that_may_provide_it() -> None:
    result = run_cli("redis", "serve", manager=_failed_manager())
    assert result.exit_code == 2
    assert "No such command 'redis'" in result.stderr
    assert "Plugin 'redis' (agl-redis) may provide 'redis' but failed to load" in result.stderr
    assert "ModuleNotFoundError at import: No module named 'redis'" in result.stderr
    assert "agl plugins list" in result.stderr


def test_an_unknown_store_scheme_names_the_failed_plugin() -> None:
    with pytest.raises(UnknownComponentError) as caught:
        _failed_manager().registry("store").create("redis://127.0.0.1:6379")
    message = str(caught.value)
    assert "No store opens URIs with scheme 'redis'" in message
    assert "Plugin 'redis' (agl-redis) may provide 'redis' but failed to load" in message


def test_debug_prints_a_failed_plugins_traceback() -> None:
    result = run_cli("--debug", "plugins", "list", manager=_failed_manager())
    assert "Traceback (most recent call last)" in result.output
    assert "Traceback" not in run_cli("plugins", "list", manager=_failed_manager()).output


def test_install_hints_go_through_the_distributions_own_extras() -> None:
    from agl_core.registry import declared_install, install_command

    assert declared_install("agl-core", "openai") == "agl-core[openai]"  # an extra, with its pins
    assert declared_install("agl-core", "pluggy") == "pluggy>=1.5"  # a plain dependency
    assert declared_install("agl-core", "no-such-package") is None
    assert declared_install("agl-not-installed", "openai") is None
    assert install_command("agl-core", ["openai>=1.26 (found 0.1)"]) == "pip install 'agl-core[openai]'"
