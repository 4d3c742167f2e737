"""Resources an algorithm publishes to runners (LLM endpoints, prompt templates) and their registry.

Resource types are registrable: a plugin defines a :class:`Resource` subclass with a
``resource_type: Literal["<name>"] = "<name>"`` field and calls :func:`register_resource_type`. Fields
typed :data:`ResourceUnion` (and so :data:`NamedResources` and :class:`ResourcesUpdate`) look the type up
in the registry when they validate, so a type registered after those models were built still works.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, get_args, get_origin

from pydantic import (
    BaseModel,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationInfo,
)
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

if TYPE_CHECKING:
    from pydantic.json_schema import JsonSchemaValue

    from agl_core.types.core import AttemptedRollout

__all__ = [
    "LLM",
    "NamedResources",
    "PromptTemplate",
    "ProxyLLM",
    "Resource",
    "ResourceUnion",
    "ResourcesUpdate",
    "get_resource_types",
    "register_resource_type",
    "unregister_resource_type",
]


class Resource(BaseModel):
    """Base class of every resource; subclasses pin ``resource_type`` to a unique string literal."""

    resource_type: Any


class LLM(Resource):
    """An OpenAI-compatible model endpoint, with the model name and default sampling parameters."""

    resource_type: Literal["llm"] = "llm"
    endpoint: str
    model: str
    api_key: str | None = None
    sampling_parameters: dict[str, Any] = Field(default_factory=dict)

    def get_base_url(self, *args: Any, **kwargs: Any) -> str:
        """Return the base URL to send requests to (the ``endpoint``; arguments are ignored)."""
        return self.endpoint


class ProxyLLM(LLM):
    """An LLM served through the agl LLM proxy, which routes each request by rollout and attempt.

    Use :meth:`get_base_url` with the rollout and attempt ids (or :meth:`with_attempted_rollout`) so
    the proxy can attribute the request. Unlike Agent Lightning 0.3, reading ``.endpoint`` directly does
    not warn: agl fixes that quirk (it relied on inspecting the call stack), ``endpoint`` is a plain field.
    """

    resource_type: Literal["proxy_llm"] = "proxy_llm"  # type: ignore[assignment]

    def get_base_url(self, rollout_id: str | None = None, attempt_id: str | None = None) -> str:
        """Return the endpoint routed to one rollout attempt.

        With no ids, the endpoint is returned unchanged. Otherwise one trailing ``/`` and a trailing
        ``/v1`` are removed, ``/rollout/{rollout_id}/attempt/{attempt_id}`` is appended and ``/v1`` is
        put back if it was there: ``http://h/v1`` -> ``http://h/rollout/r/attempt/a/v1``.

        Raises:
            ValueError: if only one id is given, or an id is not a string.
        """
        if rollout_id is None and attempt_id is None:
            return self.endpoint
        if not isinstance(rollout_id, str) or not isinstance(attempt_id, str):
            raise ValueError("rollout_id and attempt_id must be strings or all be empty")
        prefix = self.endpoint
        if prefix.endswith("/"):
            prefix = prefix[:-1]
        has_v1 = prefix.endswith("/v1")
        if has_v1:
            prefix = prefix[: -len("/v1")]
        routed = f"{prefix}/rollout/{rollout_id}/attempt/{attempt_id}"
        return f"{routed}/v1" if has_v1 else routed

    def with_attempted_rollout(self, rollout: AttemptedRollout) -> LLM:
        """Return a plain :class:`LLM` whose endpoint is routed to ``rollout``'s current attempt."""
        return LLM(
            endpoint=self.get_base_url(rollout.rollout_id, rollout.attempt.attempt_id),
            model=self.model,
            api_key=self.api_key,
            sampling_parameters=dict(self.sampling_parameters),
        )


_jinja_environment: Any = None


def _render_jinja(template: str, variables: dict[str, Any]) -> str:
    """Render a Jinja template in a sandboxed environment (templates may come from an optimizer's LLM)."""
    global _jinja_environment
    if _jinja_environment is None:
        try:
            from jinja2.sandbox import SandboxedEnvironment  # type: ignore[import-not-found, unused-ignore]
        except ImportError as exc:
            raise ImportError(
                "PromptTemplate(engine='jinja') needs the jinja2 package: `pip install jinja2`"
            ) from exc
        _jinja_environment = SandboxedEnvironment()
    return str(_jinja_environment.from_string(template).render(**variables))


class PromptTemplate(Resource):
    """A prompt template and the engine that renders it (``f-string``, ``jinja`` or ``poml``)."""

    resource_type: Literal["prompt_template"] = "prompt_template"
    template: str
    engine: Literal["jinja", "f-string", "poml"]

    def format(self, **kwargs: Any) -> str:
        """Render the template with ``kwargs``.

        ``f-string`` uses :meth:`str.format`; ``jinja`` needs the optional ``jinja2`` package and renders
        in a sandbox.

        Raises:
            NotImplementedError: for ``poml`` templates, which need the POML renderer of the APO plugin.
            ImportError: for ``jinja`` templates when jinja2 is not installed.
        """
        if self.engine == "f-string":
            return self.template.format(**kwargs)
        if self.engine == "jinja":
            return _render_jinja(self.template, kwargs)
        raise NotImplementedError(
            f"PromptTemplate.format() does not render {self.engine!r} templates; render POML with the "
            "`poml` package (installed with the agl-apo plugin) or use engine='f-string' or 'jinja'"
        )


_ResourceClass = TypeVar("_ResourceClass", bound=type[Resource])

_registry: dict[str, type[Resource]] = {}
_registry_lock = threading.Lock()
_BUILTIN_TYPES = frozenset({"llm", "proxy_llm", "prompt_template"})


def _qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _declared_resource_type(cls: Any) -> str:
    """Return the ``resource_type`` literal ``cls`` declares, or raise explaining what is wrong."""
    if not isinstance(cls, type) or not issubclass(cls, Resource) or cls is Resource:
        raise TypeError(f"register_resource_type() expects a Resource subclass, got {cls!r}")
    field = cls.model_fields["resource_type"]
    options = get_args(field.annotation) if get_origin(field.annotation) is Literal else ()
    if len(options) != 1 or not isinstance(options[0], str) or field.default != options[0]:
        raise ValueError(
            f"{_qualified_name(cls)} must declare its type as `resource_type: Literal['<name>'] = '<name>'` "
            f"(one string literal with the same default), not {field.annotation!r} = {field.default!r}"
        )
    return options[0]


def register_resource_type(cls: _ResourceClass) -> _ResourceClass:
    """Register a :class:`Resource` subclass so :data:`ResourceUnion` fields accept it; returns ``cls``.

    Usable as a class decorator. Registering the same class again is a no-op.

    Raises:
        TypeError: if ``cls`` is not a subclass of :class:`Resource`.
        ValueError: if ``cls`` does not pin ``resource_type`` to a string literal, or another class
            already registered that ``resource_type``.
    """
    name = _declared_resource_type(cls)
    with _registry_lock:
        existing = _registry.get(name)
        if existing is not None and existing is not cls:
            raise ValueError(
                f"resource_type {name!r} is already registered by {_qualified_name(existing)}; "
                f"{_qualified_name(cls)} cannot claim it too (pick another resource_type)"
            )
        _registry[name] = cls
    return cls


def unregister_resource_type(resource_type: str | type[Resource]) -> None:
    """Remove a registered resource type, by name or class (for plugin teardown and tests).

    Unknown names are ignored. The built-in ``llm``, ``proxy_llm`` and ``prompt_template`` types cannot be
    removed (``ValueError``).
    """
    name = resource_type if isinstance(resource_type, str) else _declared_resource_type(resource_type)
    if name in _BUILTIN_TYPES:
        raise ValueError(f"the built-in resource_type {name!r} cannot be unregistered")
    with _registry_lock:
        if isinstance(resource_type, str) or _registry.get(name) is resource_type:
            _registry.pop(name, None)


def get_resource_types() -> dict[str, type[Resource]]:
    """Return a snapshot of the registry: ``resource_type`` -> class, sorted by name."""
    with _registry_lock:
        return dict(sorted(_registry.items()))


def _known_types() -> str:
    return ", ".join(repr(name) for name in sorted(_registry))


def _validate_resource(value: Any, info: ValidationInfo) -> Resource:
    """Validate one resource: pass instances through, dispatch dicts on their ``resource_type``."""
    if isinstance(value, Resource):
        return value
    if not isinstance(value, Mapping):
        raise PydanticCustomError(
            "resource_type",
            "Expected a Resource or a mapping with a 'resource_type' key, got {type}",
            {"type": type(value).__name__},
        )
    name = value.get("resource_type")
    cls = _registry.get(name) if isinstance(name, str) else None
    if cls is None:
        problem = "Missing 'resource_type'" if name is None else f"Unknown resource_type {name!r}"
        raise PydanticCustomError(
            "resource_type",
            "{problem}; known resource types: {known}. Custom types must be registered with "
            "agl_core.types.register_resource_type()",
            {"problem": problem, "known": _known_types()},
        )
    return cls.model_validate(value, context=info.context)


def _serialize_resource(value: Any, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
    """Dump a resource with its own class's fields, keeping ``resource_type`` even when it is a default.

    Without the discriminator a dump made with ``exclude_defaults``/``exclude_unset`` could not be read
    back, so it is put back in those two cases.
    """
    data = handler(value)
    if (
        (info.exclude_defaults or info.exclude_unset)
        and isinstance(data, dict)
        and "resource_type" not in data
        and isinstance(value, Resource)
    ):
        data = {"resource_type": value.resource_type, **data}
    return data


class _RegisteredResource:
    """Schema hook behind :data:`ResourceUnion`: registry dispatch, subclass-aware dump, oneOf schema."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        # The inner ``any`` schema makes pydantic serialize each value with its runtime class, so a
        # resource dumps with its own subclass fields; the wrapper keeps the discriminator.
        return core_schema.with_info_plain_validator_function(
            _validate_resource,
            serialization=core_schema.wrap_serializer_function_ser_schema(
                _serialize_resource, info_arg=True, schema=core_schema.any_schema()
            ),
        )

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # Describe the types registered now as the discriminated union pydantic would emit for them:
        # ``oneOf`` of ``$ref``s plus ``discriminator.mapping`` on ``resource_type``.
        union = core_schema.tagged_union_schema(
            {name: cls.__pydantic_core_schema__ for name, cls in get_resource_types().items()},
            discriminator="resource_type",
        )
        return handler(union)


ResourceUnion = Annotated[Resource, _RegisteredResource()]
"""A resource of any registered type, discriminated by ``resource_type`` (see module docstring)."""

NamedResources = dict[str, ResourceUnion]
"""Resources by the name the agent asks for them with (for example ``{"main_llm": LLM(...)}``)."""


class ResourcesUpdate(BaseModel):
    """One version of the resources an algorithm published."""

    resources_id: str
    create_time: float
    update_time: float
    version: int
    resources: NamedResources


for _builtin in (LLM, ProxyLLM, PromptTemplate):
    register_resource_type(_builtin)
del _builtin
