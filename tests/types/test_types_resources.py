"""Resources: the registry-backed discriminated union, ProxyLLM routing and prompt templates."""

import logging
import sys
import warnings
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

import agl_core.types.resources as resources_module
from agl_core.types import (
    LLM,
    Attempt,
    AttemptedRollout,
    NamedResources,
    PromptTemplate,
    ProxyLLM,
    Resource,
    ResourcesUpdate,
    ResourceUnion,
    get_resource_types,
    register_resource_type,
    unregister_resource_type,
)

UNION = TypeAdapter(ResourceUnion)
NAMED = TypeAdapter(NamedResources)


class Checkpoint(Resource):
    """A custom resource type a plugin could add."""

    resource_type: Literal["test_checkpoint"] = "test_checkpoint"
    path: str
    step: int = 0
    tags: list[str] = []


@pytest.fixture
def checkpoint_type() -> Iterator[type[Checkpoint]]:
    register_resource_type(Checkpoint)
    try:
        yield Checkpoint
    finally:
        unregister_resource_type(Checkpoint)


def _update(resources: dict[str, Any]) -> ResourcesUpdate:
    return ResourcesUpdate(
        resources_id="rs-1", create_time=1.0, update_time=2.5, version=3, resources=resources
    )


def test_builtin_types_are_registered() -> None:
    builtins = {"llm": LLM, "prompt_template": PromptTemplate, "proxy_llm": ProxyLLM}
    assert builtins.items() <= get_resource_types().items()
    assert list(get_resource_types()) == sorted(get_resource_types())


@pytest.mark.parametrize(
    ("data", "cls"),
    [
        ({"resource_type": "llm", "endpoint": "http://h/v1", "model": "m"}, LLM),
        ({"resource_type": "proxy_llm", "endpoint": "http://h/v1", "model": "m"}, ProxyLLM),
        ({"resource_type": "prompt_template", "template": "Hi {name}", "engine": "f-string"}, PromptTemplate),
    ],
)
def test_dict_validates_to_the_registered_subclass(data: dict[str, Any], cls: type[Resource]) -> None:
    resource = UNION.validate_python(data)
    assert type(resource) is cls
    assert NAMED.validate_python({"x": data})["x"] == resource


def test_resources_update_round_trips_every_builtin_with_subclass_fields() -> None:
    update = _update(
        {
            "main": LLM(
                endpoint="http://h/v1", model="m", api_key="k", sampling_parameters={"temperature": 0.2}
            ),
            "proxy": ProxyLLM(endpoint="http://p/v1", model="m2"),
            "prompt": PromptTemplate(template="Q: {q}", engine="f-string"),
        }
    )
    dumped = update.model_dump()
    assert dumped["resources"]["main"] == {
        "resource_type": "llm",
        "endpoint": "http://h/v1",
        "model": "m",
        "api_key": "k",
        "sampling_parameters": {"temperature": 0.2},
    }
    assert dumped["resources"]["prompt"] == {
        "resource_type": "prompt_template",
        "template": "Q: {q}",
        "engine": "f-string",
    }
    restored = ResourcesUpdate.model_validate_json(update.model_dump_json())
    assert restored == update
    assert [type(r) for r in restored.resources.values()] == [LLM, ProxyLLM, PromptTemplate]
    assert ResourcesUpdate.model_validate(dumped) == update


def test_dump_keeps_discriminator_with_exclude_defaults_and_unset() -> None:
    update = _update(
        {"main": LLM(endpoint="e", model="m"), "prompt": PromptTemplate(template="t", engine="jinja")}
    )
    for kwargs in ({"exclude_defaults": True}, {"exclude_unset": True}, {"exclude_none": True}):
        text = update.model_dump_json(**kwargs)  # type: ignore[arg-type]
        assert '"resource_type":"llm"' in text
        assert ResourcesUpdate.model_validate_json(text) == update
    assert "api_key" not in update.model_dump(exclude_none=True)["resources"]["main"]


def test_instances_pass_through_unchanged() -> None:
    llm = ProxyLLM(endpoint="e", model="m")
    assert UNION.validate_python(llm) is llm
    assert _update({"x": llm}).resources["x"] is llm


def test_unknown_resource_type_lists_known_ones() -> None:
    with pytest.raises(ValidationError) as info:
        _update({"x": {"resource_type": "weights", "path": "/tmp"}})
    error = info.value.errors()[0]
    assert error["loc"] == ("resources", "x")
    assert "Unknown resource_type 'weights'" in error["msg"]
    for known in ("'llm'", "'proxy_llm'", "'prompt_template'"):
        assert known in error["msg"]
    assert "register_resource_type" in error["msg"]


def test_missing_resource_type_and_non_mapping_are_rejected() -> None:
    with pytest.raises(ValidationError, match="Missing 'resource_type'; known resource types: 'llm'"):
        UNION.validate_python({"endpoint": "e", "model": "m"})
    with pytest.raises(ValidationError, match="Expected a Resource or a mapping"):
        UNION.validate_python("llm")
    with pytest.raises(ValidationError, match="Unknown resource_type 3"):
        UNION.validate_python({"resource_type": 3})


def test_field_errors_of_the_chosen_type_keep_their_location() -> None:
    with pytest.raises(ValidationError) as info:
        _update({"x": {"resource_type": "llm", "model": 3}})
    locations = {error["loc"] for error in info.value.errors()}
    assert locations == {("resources", "x", "endpoint"), ("resources", "x", "model")}


def test_json_schema_is_one_of_with_discriminator() -> None:
    schema = ResourcesUpdate.model_json_schema()
    union = schema["properties"]["resources"]["additionalProperties"]
    assert union["discriminator"]["propertyName"] == "resource_type"
    assert {
        "llm": "#/$defs/LLM",
        "prompt_template": "#/$defs/PromptTemplate",
        "proxy_llm": "#/$defs/ProxyLLM",
    }.items() <= union["discriminator"]["mapping"].items()
    assert {"$ref": "#/$defs/ProxyLLM"} in union["oneOf"]
    assert len(union["oneOf"]) == len(get_resource_types())
    assert schema["$defs"]["LLM"]["properties"]["resource_type"]["const"] == "llm"
    assert "endpoint" in schema["$defs"]["ProxyLLM"]["properties"]


def test_custom_type_registered_later_round_trips(checkpoint_type: type[Checkpoint]) -> None:
    # ResourcesUpdate and NamedResources were built long before the registration above.
    assert get_resource_types()["test_checkpoint"] is checkpoint_type
    update = _update(
        {
            "ckpt": {"resource_type": "test_checkpoint", "path": "/ckpt/7", "step": 7, "tags": ["best"]},
            "llm": {"resource_type": "llm", "endpoint": "e", "model": "m"},
        }
    )
    assert type(update.resources["ckpt"]) is checkpoint_type
    assert update.model_dump()["resources"]["ckpt"] == {
        "resource_type": "test_checkpoint",
        "path": "/ckpt/7",
        "step": 7,
        "tags": ["best"],
    }
    assert ResourcesUpdate.model_validate_json(update.model_dump_json()) == update
    named = NAMED.validate_json(NAMED.dump_json(update.resources))
    assert named == update.resources

    schema = ResourcesUpdate.model_json_schema()
    union = schema["properties"]["resources"]["additionalProperties"]
    assert union["discriminator"]["mapping"]["test_checkpoint"] == "#/$defs/Checkpoint"
    assert {"$ref": "#/$defs/Checkpoint"} in union["oneOf"]
    assert len(union["oneOf"]) == len(get_resource_types())


def test_custom_type_is_gone_after_unregistering() -> None:
    register_resource_type(Checkpoint)
    unregister_resource_type("test_checkpoint")
    assert "test_checkpoint" not in get_resource_types()
    with pytest.raises(ValidationError, match="Unknown resource_type 'test_checkpoint'"):
        UNION.validate_python({"resource_type": "test_checkpoint", "path": "p"})
    unregister_resource_type("test_checkpoint")  # unknown names are ignored


def test_registering_the_same_class_twice_is_a_no_op(checkpoint_type: type[Checkpoint]) -> None:
    assert register_resource_type(checkpoint_type) is checkpoint_type
    assert list(get_resource_types()).count("test_checkpoint") == 1


def test_conflicting_registration_names_both_classes(checkpoint_type: type[Checkpoint]) -> None:
    class OtherCheckpoint(Resource):
        resource_type: Literal["test_checkpoint"] = "test_checkpoint"

    with pytest.raises(ValueError) as info:
        register_resource_type(OtherCheckpoint)
    message = str(info.value)
    assert "'test_checkpoint'" in message
    assert f"{__name__}.Checkpoint" in message
    assert "OtherCheckpoint" in message
    # a different class cannot unregister the owner either
    unregister_resource_type(OtherCheckpoint)
    assert get_resource_types()["test_checkpoint"] is checkpoint_type


def test_llm_builtin_name_cannot_be_taken_or_removed() -> None:
    class FakeLLM(Resource):
        resource_type: Literal["llm"] = "llm"

    with pytest.raises(ValueError, match=r"already registered by agl_core\.types\.resources\.LLM"):
        register_resource_type(FakeLLM)
    with pytest.raises(ValueError, match="built-in"):
        unregister_resource_type("llm")
    with pytest.raises(ValueError, match="built-in"):
        unregister_resource_type(ProxyLLM)


def test_register_validates_the_class() -> None:
    class NotAResource(BaseModel):
        resource_type: Literal["x"] = "x"

    class NoLiteral(Resource):
        resource_type: str = "x"

    class NoDefault(Resource):
        resource_type: Literal["x"]

    class TwoValues(Resource):
        resource_type: Literal["x", "y"] = "x"

    with pytest.raises(TypeError, match="Resource subclass"):
        register_resource_type(NotAResource)  # type: ignore[type-var]
    with pytest.raises(TypeError, match="Resource subclass"):
        register_resource_type(Resource)
    with pytest.raises(TypeError, match="Resource subclass"):
        register_resource_type("llm")  # type: ignore[type-var]
    for bad in (NoLiteral, NoDefault, TwoValues):
        with pytest.raises(ValueError, match=r"resource_type: Literal\['<name>'\] = '<name>'"):
            register_resource_type(bad)
    assert "x" not in get_resource_types()


def test_register_works_as_a_decorator() -> None:
    @register_resource_type
    class Adapter(Resource):
        resource_type: Literal["test_adapter"] = "test_adapter"
        rank: int

    try:
        assert type(UNION.validate_python({"resource_type": "test_adapter", "rank": 8})) is Adapter
    finally:
        unregister_resource_type(Adapter)
    assert "test_adapter" not in get_resource_types()


def test_llm_get_base_url_ignores_arguments() -> None:
    llm = LLM(endpoint="http://h/v1/", model="m")
    assert llm.get_base_url() == "http://h/v1/"
    assert llm.get_base_url("ro", "at", anything=1) == "http://h/v1/"
    assert llm.api_key is None and llm.sampling_parameters == {}


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("http://proxy:9000", "http://proxy:9000/rollout/ro-1/attempt/at-1"),
        ("http://proxy:9000/", "http://proxy:9000/rollout/ro-1/attempt/at-1"),
        ("http://proxy:9000/v1", "http://proxy:9000/rollout/ro-1/attempt/at-1/v1"),
        ("http://proxy:9000/v1/", "http://proxy:9000/rollout/ro-1/attempt/at-1/v1"),
        ("http://proxy:9000/api/v1", "http://proxy:9000/api/rollout/ro-1/attempt/at-1/v1"),
        ("http://proxy:9000/v1beta", "http://proxy:9000/v1beta/rollout/ro-1/attempt/at-1"),
        ("http://proxy:9000//", "http://proxy:9000//rollout/ro-1/attempt/at-1"),  # only one "/" is stripped
    ],
)
def test_proxy_llm_routes_by_rollout_and_attempt(endpoint: str, expected: str) -> None:
    assert ProxyLLM(endpoint=endpoint, model="m").get_base_url("ro-1", "at-1") == expected


@pytest.mark.parametrize("endpoint", ["http://proxy:9000/v1/", "http://proxy:9000"])
def test_proxy_llm_without_ids_returns_endpoint_unchanged(endpoint: str) -> None:
    proxy = ProxyLLM(endpoint=endpoint, model="m")
    assert proxy.get_base_url() == endpoint
    assert proxy.get_base_url(None, None) == endpoint


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rollout_id": "ro-1"},
        {"attempt_id": "at-1"},
        {"rollout_id": "ro-1", "attempt_id": 5},
        {"rollout_id": 1},
    ],
)
def test_proxy_llm_requires_both_ids_as_strings(kwargs: dict[str, Any]) -> None:
    proxy = ProxyLLM(endpoint="http://p/v1", model="m")
    with pytest.raises(ValueError) as info:
        proxy.get_base_url(**kwargs)
    assert str(info.value) == "rollout_id and attempt_id must be strings or all be empty"


def test_proxy_llm_endpoint_access_does_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    proxy = ProxyLLM(endpoint="http://p/v1", model="m")
    with caplog.at_level(logging.DEBUG), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert proxy.endpoint == "http://p/v1"
    assert caplog.records == []


def test_proxy_llm_with_attempted_rollout_returns_routed_plain_llm() -> None:
    proxy = ProxyLLM(endpoint="http://p/v1", model="m", api_key="k", sampling_parameters={"temperature": 0.5})
    attempt = Attempt(rollout_id="ro-9", attempt_id="at-3", sequence_id=3, start_time=1.0)
    rollout = AttemptedRollout(rollout_id="ro-9", input=None, start_time=0.0, attempt=attempt)
    llm = proxy.with_attempted_rollout(rollout)
    assert type(llm) is LLM
    assert llm.resource_type == "llm"
    assert llm.endpoint == "http://p/rollout/ro-9/attempt/at-3/v1"
    assert (llm.model, llm.api_key, llm.sampling_parameters) == ("m", "k", {"temperature": 0.5})
    llm.sampling_parameters["temperature"] = 1.0
    assert proxy.sampling_parameters == {"temperature": 0.5}


def test_prompt_template_f_string() -> None:
    template = PromptTemplate(
        template="Solve {problem} in {steps} steps; literal {{braces}}", engine="f-string"
    )
    assert template.format(problem="x+1=2", steps=3) == "Solve x+1=2 in 3 steps; literal {braces}"
    with pytest.raises(KeyError):
        template.format(problem="only one")


def test_prompt_template_rejects_unknown_engine() -> None:
    with pytest.raises(ValidationError):
        PromptTemplate(template="t", engine="mustache")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        PromptTemplate(template="t")  # type: ignore[call-arg]


def test_prompt_template_poml_is_not_rendered() -> None:
    template = PromptTemplate(template="<poml><p>{{x}}</p></poml>", engine="poml")
    with pytest.raises(NotImplementedError, match="'poml'"):
        template.format(x=1)


def test_prompt_template_jinja_without_jinja2_explains_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resources_module, "_jinja_environment", None)
    monkeypatch.setitem(sys.modules, "jinja2", None)
    monkeypatch.setitem(sys.modules, "jinja2.sandbox", None)
    template = PromptTemplate(template="Hello {{ name }}", engine="jinja")
    with pytest.raises(ImportError, match="pip install jinja2"):
        template.format(name="x")


def test_prompt_template_jinja_renders_when_available() -> None:
    pytest.importorskip("jinja2")
    template = PromptTemplate(template="Hello {{ name }}{% if n %} x{{ n }}{% endif %}", engine="jinja")
    assert template.format(name="Ada", n=2) == "Hello Ada x2"
    assert template.format(name="Ada") == "Hello Ada"
