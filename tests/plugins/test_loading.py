"""Plugin loading: good plugins register, broken ones are isolated and reported."""

from __future__ import annotations

import pytest

from agl_core import hookimpl
from agl_core.errors import ComponentSpecError, PluginConflictError, PluginLoadError, UnknownComponentError
from agl_core.plugins import PluginManager
from agl_testing import fake_entry_point, plugin_module, register_plugin


class Widget:
    """A component used as a registration target."""

    def __init__(self, size: int = 1) -> None:
        self.size = size


def good_plugin_module():
    @hookimpl
    def agl_register_algorithms(registry):
        registry.add("algo-x", Widget, summary="an algorithm")

    @hookimpl
    def agl_register_runners(registry):
        registry.add("runner-x", "tests.plugins.test_loading:Widget", summary="a runner")

    @hookimpl
    def agl_register_tracers(registry):
        registry.add("tracer-x", Widget)

    @hookimpl
    def agl_register_adapters(registry):
        registry.add("adapter-x", Widget, aliases=["adapter-y"])

    @hookimpl
    def agl_register_stores(registry):
        registry.add("store-x", Widget, schemes=["xstore"])

    return plugin_module(
        "good",
        agl_register_algorithms=agl_register_algorithms,
        agl_register_runners=agl_register_runners,
        agl_register_tracers=agl_register_tracers,
        agl_register_adapters=agl_register_adapters,
        agl_register_stores=agl_register_stores,
    )


def stores_plugin(name: str, store_name: str):
    @hookimpl
    def agl_register_stores(registry):
        registry.add(store_name, Widget)

    return plugin_module(name, agl_register_stores=agl_register_stores)


def test_good_plugin_registers_each_of_the_five_kinds(plugin_manager: PluginManager) -> None:
    record = plugin_manager.register(good_plugin_module(), name="good", distribution="agl-good")
    assert record.status == "ok"
    expected = {
        "algorithm": "algo-x",
        "runner": "runner-x",
        "tracer": "tracer-x",
        "adapter": "adapter-x",
        "store": "store-x",
    }
    for kind, name in expected.items():
        entry = plugin_manager.registry(kind).get(name)
        assert entry.plugin == "good"
        assert entry.distribution == "agl-good"
        assert entry.load() is Widget
        # every registry knows its kind's base class, so a Widget is refused when built
        with pytest.raises(ComponentSpecError, match="produced Widget, which is not a"):
            plugin_manager.registry(kind).create(name)
    assert plugin_manager.registry("adapter").get("adapter-y").name == "adapter-x"
    assert plugin_manager.registry("store").scheme_entry("xstore").name == "store-x"
    provided = {(p["kind"], p["name"]) for p in plugin_manager.provides("good")}
    assert provided == set(expected.items())


def test_string_targets_are_not_imported_until_used(plugin_manager: PluginManager) -> None:
    @hookimpl
    def agl_register_algorithms(registry):
        registry.add("lazy", "agl_no_such_module_xyz.sub:Thing", summary="never imported")

    record = plugin_manager.register(
        plugin_module("lazy", agl_register_algorithms=agl_register_algorithms), name="lazy"
    )
    assert record.status == "ok"
    with pytest.raises(ImportError, match="agl_no_such_module_xyz"):
        plugin_manager.registry("algorithm").create("lazy")


def test_plugin_whose_import_raises_is_recorded_and_others_keep_working(
    plugin_manager: PluginManager,
) -> None:
    def broken_import():
        raise ModuleNotFoundError("No module named 'verl'", name="verl")

    records = plugin_manager.load_entrypoints(
        [
            fake_entry_point("broken", broken_import, distribution="agl-broken"),
            fake_entry_point("good", good_plugin_module(), distribution="agl-good"),
        ]
    )
    by_name = {r.name: r for r in records}
    assert by_name["broken"].status == "failed"
    assert by_name["broken"].error is not None
    assert by_name["broken"].error.stage == "import"
    assert by_name["broken"].error.type == "ModuleNotFoundError"
    assert "the module 'verl'" in (by_name["broken"].error.hint or "")
    assert by_name["good"].status == "ok"
    assert "store-x" in plugin_manager.registry("store")


def test_unknown_hook_is_rejected_with_a_suggestion(plugin_manager: PluginManager) -> None:
    @hookimpl
    def agl_register_store(registry):  # missing "s"
        registry.add("typo", Widget)

    record = plugin_manager.register(
        plugin_module("typo", agl_register_store=agl_register_store), name="typo"
    )
    assert record.status == "failed"
    assert record.error is not None and record.error.stage == "validate"
    assert "agl_register_stores" in record.error.message
    assert "typo" not in plugin_manager.registry("store")


def test_a_misspelt_unmarked_hook_function_is_still_validated(plugin_manager: PluginManager) -> None:
    def agl_register_algorithm(registry):
        registry.add("x", Widget)

    record = plugin_manager.register(
        plugin_module("unmarked", agl_register_algorithm=agl_register_algorithm), name="unmarked"
    )
    assert record.status == "failed"
    assert "agl_register_algorithms" in record.error.message  # type: ignore[union-attr]


def test_an_unmarked_hook_fails_the_plugin_instead_of_being_ignored(plugin_manager: PluginManager) -> None:
    def agl_register_algorithms(registry):
        registry.add("x", Widget)

    record = plugin_manager.register(
        plugin_module("bare", agl_register_algorithms=agl_register_algorithms), name="bare"
    )
    assert record.status == "failed" and record.error is not None
    assert record.error.stage == "validate"
    assert "decorate it with @agl_core.hookimpl" in record.error.message
    assert "x" not in plugin_manager.registry("algorithm")


def test_extra_argument_fails_pluggy_validation(plugin_manager: PluginManager) -> None:
    @hookimpl
    def agl_register_stores(registry, extra):
        registry.add("extra", Widget)

    record = plugin_manager.register(
        plugin_module("extra", agl_register_stores=agl_register_stores), name="extra"
    )
    assert record.status == "failed"
    assert record.error is not None
    assert record.error.stage == "validate"
    assert "extra" in record.error.message
    assert "extra" not in plugin_manager.registry("store")
    # the name is free again: a fixed version can register
    fixed = plugin_manager.register(stores_plugin("extra", "extra"), name="extra")
    assert fixed.status == "ok"


def test_register_hook_that_raises_is_rolled_back(plugin_manager: PluginManager) -> None:
    @hookimpl
    def agl_register_algorithms(registry):
        registry.add("half", Widget)

    @hookimpl
    def agl_register_stores(registry):
        registry.add("half-store", Widget)
        raise RuntimeError("backend exploded")

    record = plugin_manager.register(
        plugin_module(
            "half", agl_register_algorithms=agl_register_algorithms, agl_register_stores=agl_register_stores
        ),
        name="half",
    )
    assert record.status == "failed"
    assert record.error is not None
    assert record.error.stage == "agl_register_stores"
    assert record.error.message == "backend exploded"
    # nothing it registered survives, in any registry
    assert "half" not in plugin_manager.registry("algorithm")
    assert "half-store" not in plugin_manager.registry("store")
    # and the failure is mentioned when a user asks for one of its names
    with pytest.raises(UnknownComponentError, match="failed to load"):
        plugin_manager.registry("algorithm").create("half")


def test_two_plugins_claiming_one_name_names_both_distributions(plugin_manager: PluginManager) -> None:
    first = plugin_manager.register(stores_plugin("one", "shared"), name="one", distribution="agl-one")
    second = plugin_manager.register(stores_plugin("two", "shared"), name="two", distribution="agl-two")
    assert first.status == "ok"
    assert second.status == "failed"
    assert second.error is not None
    assert "agl-one" in second.error.message and "agl-two" in second.error.message
    assert plugin_manager.registry("store").get("shared").distribution == "agl-one"


def test_conflict_raises_in_strict_mode() -> None:
    manager = PluginManager(strict=True)
    manager.register(stores_plugin("one", "shared"), name="one", distribution="agl-one")
    with pytest.raises(PluginLoadError) as info:
        manager.register(stores_plugin("two", "shared"), name="two", distribution="agl-two")
    assert isinstance(info.value.cause, PluginConflictError)
    assert "agl-one" in str(info.value) and "agl-two" in str(info.value)


def test_plugin_cannot_take_a_builtin_name() -> None:
    manager = PluginManager(strict=False)

    @hookimpl
    def agl_register_commands(cli):
        pass

    record = manager.register(stores_plugin("rogue", "core-only-name"), name="rogue")
    assert record.status == "ok"
    with pytest.raises(ValueError, match="already registered"):
        manager.register(plugin_module("rogue", agl_register_commands=agl_register_commands), name="rogue")


def test_strict_env_turns_failures_into_exceptions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGL_PLUGINS_STRICT", "1")
    manager = PluginManager()
    assert manager.strict

    def broken():
        raise ImportError("cannot import name 'x'")

    with pytest.raises(PluginLoadError, match="stage 'import'"):
        manager.load_entrypoints([fake_entry_point("broken", broken)])


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"AGL_DISABLE_PLUGINS": "alpha"}, {"alpha": "disabled", "beta": "ok"}),
        ({"AGL_DISABLE_PLUGINS": "agl-beta"}, {"alpha": "ok", "beta": "disabled"}),
        ({"AGL_DISABLE_PLUGINS": "*"}, {"alpha": "disabled", "beta": "disabled"}),
        ({"AGL_LOAD_PLUGINS": "beta"}, {"alpha": "disabled", "beta": "ok"}),
        ({"AGL_LOAD_PLUGINS": ""}, {"alpha": "disabled", "beta": "disabled"}),
        ({}, {"alpha": "ok", "beta": "ok"}),
    ],
)
def test_env_switches(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: dict[str, str]) -> None:
    for var in ("AGL_DISABLE_PLUGINS", "AGL_LOAD_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    manager = PluginManager(strict=False)
    manager.load_entrypoints(
        [
            fake_entry_point("alpha", stores_plugin("alpha", "alpha-store"), distribution="agl-alpha"),
            fake_entry_point("beta", stores_plugin("beta", "beta-store"), distribution="agl-beta"),
        ]
    )
    assert {r.name: r.status for r in manager.records() if not r.builtin} == expected
    for name, status in expected.items():
        assert (f"{name}-store" in manager.registry("store")) == (status == "ok")
        if status == "disabled":
            assert manager.record(name).disabled_reason


def test_disable_all_keeps_builtins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGL_DISABLE_PLUGINS", "*")
    manager = PluginManager(strict=False)
    manager.load_entrypoints([])
    assert manager.record("core").status == "ok"


def test_register_plugin_context_manager_cleans_up(plugin_manager: PluginManager) -> None:
    with register_plugin(plugin_manager, good_plugin_module(), "temp") as record:
        assert record.status == "ok"
        assert "algo-x" in plugin_manager.registry("algorithm")
    assert "algo-x" not in plugin_manager.registry("algorithm")
    with pytest.raises(KeyError):
        plugin_manager.record("temp")


def test_requirements_are_checked_without_importing(plugin_manager: PluginManager) -> None:
    @hookimpl
    def agl_register_algorithms(registry):
        registry.add("needs-missing", Widget, requires=["agl-definitely-not-installed>=1"])
        registry.add("needs-pydantic", Widget, requires=["pydantic>=2"])
        registry.add("needs-new-pydantic", Widget, requires=["pydantic>=999"])

    plugin_manager.register(plugin_module("req", agl_register_algorithms=agl_register_algorithms), name="req")
    registry = plugin_manager.registry("algorithm")
    assert registry.get("needs-pydantic").available
    assert registry.get("needs-missing").missing == ("agl-definitely-not-installed>=1",)
    assert "found" in registry.get("needs-new-pydantic").missing[0]


def test_a_disabled_plugin_is_refused_even_when_registered_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGL_DISABLE_PLUGINS", "good,core")
    manager = PluginManager(strict=False)
    assert manager.record("core").status == "ok"  # the built-ins cannot be disabled
    record = manager.register(good_plugin_module(), name="good", distribution="agl-good")
    assert record.status == "disabled" and record.disabled_reason == "AGL_DISABLE_PLUGINS=good,core"
    assert "store-x" not in manager.registry("store")
