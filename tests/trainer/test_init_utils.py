"""`build_component` resolution order, spec kinds and error messages."""

from __future__ import annotations

from typing import Any

import pytest

from agl_core.errors import UnknownComponentError
from agl_core.plugins import PluginManager
from agl_core.tracer import DummyTracer, Tracer
from agl_core.trainer.init_utils import build_component, instantiate_component, load_class


class NamedTracer(DummyTracer):
    def __init__(self, label: str = "default", store_hint: Any = None) -> None:
        super().__init__()
        self.label = label
        self.store_hint = store_hint


def build(spec: Any, **options: Any) -> Any:
    options.setdefault("registry", "tracer")
    return build_component(spec, expected_type=Tracer, spec_name="tracer", **options)


def test_an_instance_is_returned_as_is(plugin_manager: PluginManager) -> None:
    tracer = DummyTracer()
    assert build(tracer) is tracer


def test_none_uses_the_default_factory_or_none_or_fails(plugin_manager: PluginManager) -> None:
    assert isinstance(build(None, default_factory=DummyTracer), DummyTracer)
    assert build(None, allow_none=True) is None
    with pytest.raises(ValueError, match="tracer must be provided"):
        build(None)


def test_a_class_gets_only_the_optional_defaults_it_accepts(plugin_manager: PluginManager) -> None:
    tracer = build(NamedTracer, optional_defaults={"label": "injected", "unknown": 1})
    assert isinstance(tracer, NamedTracer) and tracer.label == "injected"


def test_a_callable_optional_default_is_built_only_when_used() -> None:
    calls: list[int] = []

    def make() -> str:
        calls.append(1)
        return "lazy"

    tracer = instantiate_component(NamedTracer, {"label": "given"}, {"label": make, "store_hint": make})
    assert (tracer.label, tracer.store_hint, len(calls)) == ("given", "lazy", 1)


def test_a_factory_is_called(plugin_manager: PluginManager) -> None:
    assert build(lambda: NamedTracer("from factory")).label == "from factory"


def test_registered_names_and_both_import_path_styles_resolve(plugin_manager: PluginManager) -> None:
    assert type(build("dummy")) is DummyTracer
    assert type(build("agl_core.tracer.dummy.DummyTracer")) is DummyTracer
    assert type(build("agl_core.tracer.dummy:DummyTracer")) is DummyTracer
    assert build("tests.trainer.test_init_utils.NamedTracer").label == "default"


def test_a_dict_names_the_type_and_carries_constructor_arguments(plugin_manager: PluginManager) -> None:
    tracer = build({"type": "tests.trainer.test_init_utils:NamedTracer", "label": "from dict"})
    assert tracer.label == "from dict"
    assert type(build({"type": "dummy"})) is DummyTracer


def test_a_dict_without_type_is_an_error_unless_a_default_class_applies(
    plugin_manager: PluginManager,
) -> None:
    with pytest.raises(ValueError, match="tracer dict must have a 'type' key with the class full name"):
        build({"label": "x"})
    assert build({"label": "x"}, dict_requires_type=False, dict_default_cls=NamedTracer).label == "x"


def test_a_local_registry_is_tried_before_the_plugins(plugin_manager: PluginManager) -> None:
    assert build("mine", registry={"mine": NamedTracer}).label == "default"
    assert build({"type": "mine", "label": "y"}, registry={"mine": NamedTracer}).label == "y"
    assert type(build("mine", registry={"mine": "agl_core.tracer.dummy.DummyTracer"})) is DummyTracer


def test_an_unknown_name_lists_the_registered_ones(plugin_manager: PluginManager) -> None:
    with pytest.raises(UnknownComponentError, match="Did you mean 'dummy'"):
        build("dumy")


def test_a_result_of_the_wrong_type_is_a_type_error(plugin_manager: PluginManager) -> None:
    with pytest.raises(TypeError, match="produced str, which is not a Tracer"):
        build(lambda: "not a tracer")
    with pytest.raises(TypeError, match="custom: str for tracer"):
        build(lambda: "x", type_error_fmt="custom: {type_name} for {spec_name}")
    with pytest.raises(TypeError, match="not a subclass of Tracer"):
        build(int)


def test_an_unsupported_spec_is_a_value_error(plugin_manager: PluginManager) -> None:
    with pytest.raises(ValueError, match="Invalid tracer spec 42"):
        build(42)
    with pytest.raises(ValueError, match="bad: 42"):
        build(42, invalid_spec_error_fmt="bad: {spec}")


def test_load_class_rejects_a_bare_name() -> None:
    with pytest.raises(ValueError, match="not an import path"):
        load_class("DummyTracer")
