"""Registry.create: every spec form, and errors that say what to do."""

from __future__ import annotations

import pytest

from agl_core.errors import (
    ComponentSpecError,
    MissingRequirementError,
    PluginConflictError,
    UnknownComponentError,
)
from agl_core.registry import Registry


class Base:
    """Base type of the test registry."""


class Impl(Base):
    def __init__(self, size: int = 1, tracer: str | None = None) -> None:
        self.size = size
        self.tracer = tracer

    @classmethod
    def from_uri(cls, uri: str, **kwargs: object) -> Impl:
        obj = cls(**kwargs)  # type: ignore[arg-type]
        obj.uri = uri  # type: ignore[attr-defined]
        return obj


class NotBase:
    pass


@pytest.fixture
def registry() -> Registry[Base]:
    reg: Registry[Base] = Registry("store", base=Base)
    with reg.registering("test", "agl-test"):
        reg.add("impl", Impl, summary="impl", aliases=["impl-alias"], schemes=["impl"])
        reg.add("lazy", "tests.plugins.test_registry:Impl")
    return reg


def test_instance_is_returned_as_is(registry: Registry[Base]) -> None:
    obj = Impl()
    assert registry.create(obj) is obj
    with pytest.raises(ComponentSpecError, match="instance"):
        registry.create(obj, size=3)


def test_name_alias_and_lazy_target(registry: Registry[Base]) -> None:
    assert registry.create("impl", size=2).size == 2  # type: ignore[attr-defined]
    assert isinstance(registry.create("impl-alias"), Impl)
    assert isinstance(registry.create("lazy"), Impl)


def test_dict_spec(registry: Registry[Base]) -> None:
    obj = registry.create({"type": "impl", "size": 5})
    assert obj.size == 5  # type: ignore[attr-defined]
    with pytest.raises(ComponentSpecError, match="'type' key"):
        registry.create({"size": 5})


def test_class_and_factory(registry: Registry[Base]) -> None:
    assert registry.create(Impl, size=4).size == 4  # type: ignore[attr-defined]
    assert registry.create(lambda: Impl(size=7)).size == 7  # type: ignore[attr-defined]
    with pytest.raises(ComponentSpecError, match="not a Base subclass"):
        registry.create(NotBase)
    with pytest.raises(ComponentSpecError, match="not a Base"):
        registry.create(lambda: NotBase())


def test_import_path(registry: Registry[Base]) -> None:
    assert isinstance(registry.create("tests.plugins.test_registry:Impl"), Impl)
    with pytest.raises(ComponentSpecError, match="Cannot import"):
        registry.create("tests.plugins.test_registry:Missing")


def test_defaults_only_when_accepted(registry: Registry[Base]) -> None:
    obj = registry.create("impl", defaults={"tracer": "otel", "unknown_param": 1})
    assert obj.tracer == "otel"  # type: ignore[attr-defined]
    obj = registry.create("impl", tracer="mine", defaults={"tracer": "otel"})
    assert obj.tracer == "mine"  # type: ignore[attr-defined]


def test_uri_scheme(registry: Registry[Base]) -> None:
    obj = registry.create("impl://somewhere/db", size=9)
    assert obj.uri == "impl://somewhere/db"  # type: ignore[attr-defined]
    assert obj.size == 9  # type: ignore[attr-defined]
    with pytest.raises(UnknownComponentError, match=r"mongodb.*agl-mongo"):
        registry.create("mongodb://localhost:27017")


def test_unknown_name_suggests_and_hints() -> None:
    reg: Registry[Base] = Registry("algorithm", base=Base)
    reg.add("baseline", Impl)
    with pytest.raises(UnknownComponentError) as info:
        reg.create("baselin")
    assert "Did you mean 'baseline'" in str(info.value)
    with pytest.raises(UnknownComponentError) as info:
        reg.create("apo")
    assert "pip install agl-apo" in str(info.value)
    assert isinstance(info.value, KeyError) and isinstance(info.value, ValueError)


def test_bad_spec_type(registry: Registry[Base]) -> None:
    with pytest.raises(ComponentSpecError, match="Cannot build a store from int"):
        registry.create(42)


def test_add_validates_names_and_targets() -> None:
    reg: Registry[Base] = Registry("algorithm")
    with pytest.raises(ValueError, match="Invalid algorithm name"):
        reg.add("Bad Name", Impl)
    with pytest.raises(ValueError, match="Invalid target"):
        reg.add("ok", "not a target")
    with pytest.raises(ValueError, match="Only stores"):
        reg.add("ok", Impl, schemes=["x"])


def test_alias_conflict_names_both(registry: Registry[Base]) -> None:
    with registry.registering("other", "agl-other"), pytest.raises(PluginConflictError) as info:
        registry.add("fresh", Impl, aliases=["impl"])
    assert "agl-test" in str(info.value) and "agl-other" in str(info.value)
    with registry.registering("other", "agl-other"), pytest.raises(PluginConflictError):
        registry.add("fresh2", Impl, schemes=["impl"])


def test_missing_requirement_on_create() -> None:
    reg: Registry[Base] = Registry("algorithm")
    reg.add("heavy", "agl_heavy.impl:Heavy", requires=["agl-heavy-backend-xyz>=2"])
    with pytest.raises(MissingRequirementError, match="pip install 'agl-heavy-backend-xyz>=2'"):
        reg.create("heavy")


def test_remove_plugin(registry: Registry[Base]) -> None:
    registry.remove_plugin("test")
    assert registry.names() == []
    assert registry.schemes() == {}
    assert "impl-alias" not in registry


def test_a_registry_can_name_its_base_as_an_import_path() -> None:
    reg: Registry[Base] = Registry("store", base="tests.plugins.test_registry:Base")
    with reg.registering("test", "agl-test"):
        reg.add("wrong", NotBase)
    assert reg.base is Base
    with pytest.raises(ComponentSpecError, match="produced NotBase, which is not a Base"):
        reg.create("wrong")


def test_the_process_registries_check_their_kinds_base_class() -> None:
    from agl_core.algorithm.base import Algorithm
    from agl_core.plugins import PluginManager
    from agl_core.store.base import LightningStore
    from agl_core.store.memory import InMemoryLightningStore

    manager = PluginManager(builtins=True)
    assert manager.registry("algorithm").base is Algorithm
    assert manager.registry("store").base is LightningStore
    with manager.registry("store").registering("test", "agl-test"):
        manager.registry("store").add("not-a-store", lambda uri=None: NotBase(), schemes=["notastore"])
    with pytest.raises(ComponentSpecError, match="produced NotBase, which is not a LightningStore"):
        manager.registry("store").create("not-a-store")
    with pytest.raises(ComponentSpecError, match="produced NotBase, which is not a LightningStore"):
        manager.registry("store").create("notastore://x")
    with pytest.raises(ComponentSpecError, match="not a LightningStore subclass"):
        manager.registry("store").create(NotBase)
    store = manager.registry("store").create("memory:")
    assert isinstance(store, InMemoryLightningStore)
    assert manager.registry("store").create(store) is store


def test_a_uri_opens_through_from_uri_or_calls_the_factory(registry: Registry[Base]) -> None:
    assert registry.create("IMPL://x", size=3).uri == "IMPL://x"  # type: ignore[attr-defined]
    with registry.registering("test", "agl-test"):
        registry.add("plain", lambda uri: Impl(size=len(uri)), schemes=["plain"])
    assert registry.create("plain:abc").size == 9  # type: ignore[attr-defined]
    with pytest.raises(UnknownComponentError, match="Unknown store 'no-scheme-here'"):
        registry.create("no-scheme-here")
    with pytest.raises(
        UnknownComponentError, match=r"No store opens URIs with scheme 'mongodb'.*pip install agl-mongo"
    ):
        registry.create("mongodb://localhost")


def test_uri_scheme_is_the_one_parser() -> None:
    from agl_core.registry import uri_scheme
    from agl_core.store import parse_store_uri

    assert uri_scheme("SQLite:///x.db") == "sqlite"
    assert uri_scheme("mongodb+srv://h") == "mongodb+srv"
    assert uri_scheme("/path/no/scheme") is None
    assert uri_scheme("my_pkg.mod:Class") is None  # '_' is not a scheme character
    assert parse_store_uri("HTTP://h:1") == "http"


def test_dotted_import_paths_build_without_a_colon(registry: Registry[Base]) -> None:
    assert isinstance(registry.create("tests.plugins.test_registry.Impl"), Impl)
    with pytest.raises(UnknownComponentError, match=r"Unknown store 'no_such_pkg\.Thing'"):
        registry.create("no_such_pkg.Thing")


def test_install_hints_are_data_a_plugin_extends() -> None:
    reg: Registry[Base] = Registry("algorithm", base=Base)
    assert reg.install_hint("apo") == "agl-apo"  # seeded from FIRST_PARTY_PLUGINS
    with reg.registering("family", "agl-family"):
        reg.add_install_hint("grpo", "agl-family-rl")
    with pytest.raises(
        UnknownComponentError, match="provided by the agl-family-rl plugin: pip install agl-family-rl"
    ):
        reg.create("grpo")
    reg.remove_plugin("family")
    assert reg.install_hint("grpo") is None
    stores: Registry[Base] = Registry("store", base=Base)
    with stores.registering("family", "agl-family"):
        stores.add_install_hint("redis", "agl-redis", schemes=["redis", "rediss"])
    with pytest.raises(UnknownComponentError, match="comes from agl-redis: pip install agl-redis"):
        stores.create("rediss://h")


def test_registries_are_typed_attributes_one_per_kind() -> None:
    import dataclasses

    from agl_core.plugins import PluginManager
    from agl_core.registry import COMPONENT_KINDS

    manager = PluginManager(strict=False)
    registries = manager.registries
    assert tuple(f.name for f in dataclasses.fields(registries)) == COMPONENT_KINDS
    assert [r.kind for r in registries.all()] == list(COMPONENT_KINDS)
    assert registries.store is manager.registry("store") and "sqlite" in registries.store
    with pytest.raises(ValueError, match="Unknown component kind 'stores'"):
        manager.registry("stores")
