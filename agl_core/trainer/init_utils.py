"""Agent Lightning 0.3's ``init_utils``: ``build_component`` and its helpers, over the plugin registries.

Kept as 0.3's public surface only: components are resolved by :meth:`agl_core.registry.Registry.create`
(names, import paths, dicts, store URIs); this module adds 0.3's extras around it -- None with a default,
a local ``{name: class}`` mapping tried first, a dict without ``type`` built with a default class, and
custom error messages. A spec is an instance, None, a class, a factory, a registered name or import path,
or a ``{"type": ..., **kwargs}`` dict; stores also open from URIs (``"sqlite:///run.db"``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar, overload

from agl_core.registry import Registry, import_target, instantiate

__all__ = [
    "OptionalDefaults",
    "build_component",
    "instantiate_component",
    "instantiate_from_spec",
    "load_class",
]

OptionalDefaults = dict[str, Callable[[], Any] | Any]
"""Constructor argument name -> default value, or a factory called to make it (0.3's alias)."""

T = TypeVar("T")

LocalRegistry = Mapping[str, "str | type[Any] | Callable[..., Any]"]
"""Names a caller resolves itself (``{"shm": SharedMemoryExecutionStrategy}``), before the plugins."""


def load_class(path: str) -> Any:
    """Import ``"package.module.Class"`` or ``"package.module:Class"`` and return the attribute.

    Raises:
        ValueError: ``path`` names no module attribute.
        ImportError / AttributeError: the module or attribute does not exist.
    """
    return import_target(path)


def instantiate_component(
    cls: Callable[..., T],
    provided_kwargs: Mapping[str, Any] | None = None,
    optional_defaults: Mapping[str, Any] | None = None,
) -> T:
    """Call ``cls`` with ``provided_kwargs`` plus each optional default it accepts and was not given.

    A callable default (not a class) is called to produce the value, so it is built only when used.
    """
    return instantiate(cls, provided_kwargs or {}, optional_defaults)


def _resolve_name(
    name: str, registry: LocalRegistry | str | Registry[Any] | None
) -> Callable[..., Any] | None:
    """The class/factory a string names in a local registry; None when only the plugin registry can tell."""
    if isinstance(registry, Mapping) and name in registry:
        target = registry[name]
        return load_class(target) if isinstance(target, str) else target
    return None


def _plugin_registry(registry: LocalRegistry | str | Registry[Any] | None) -> Registry[Any] | None:
    if isinstance(registry, Registry):
        return registry
    if isinstance(registry, str):
        from agl_core.plugins import get_registry

        return get_registry(registry)
    return None


def _create(
    name: str,
    kwargs: dict[str, Any],
    registry: LocalRegistry | str | Registry[Any] | None,
    optional_defaults: Mapping[str, Any] | None,
) -> Any:
    """Build ``name`` through the plugin registry (or, with none, an empty one that resolves import paths)."""
    plugins = _plugin_registry(registry) or Registry("component")
    return plugins.create(name, defaults=optional_defaults, **kwargs)


def instantiate_from_spec(
    spec: str | Mapping[str, Any],
    *,
    spec_name: str,
    optional_defaults: Mapping[str, Any] | None = None,
    dict_requires_type: bool = True,
    dict_default_cls: Callable[..., Any] | None = None,
    registry: LocalRegistry | str | Registry[Any] | None = None,
) -> Any:
    """Build a component from a string or a dict.

    A string is a name in ``registry`` (a local mapping, or a plugin kind such as ``"tracer"``), a store
    URI, or an import path. A dict names the class with ``type`` (or ``name``); the other keys are
    constructor arguments. A dict without a type uses ``dict_default_cls`` when given.

    Raises:
        ValueError: a dict without ``type`` and no default class.
        TypeError: ``spec`` is neither a string nor a dict.
    """
    if isinstance(spec, str):
        local = _resolve_name(spec, registry)
        if local is not None:
            return instantiate_component(local, None, optional_defaults)
        return _create(spec, {}, registry, optional_defaults)
    if isinstance(spec, Mapping):
        kwargs = dict(spec)
        type_name = kwargs.pop("type", None)
        if type_name is None and "name" in kwargs and isinstance(registry, (Mapping, str, Registry)):
            type_name = kwargs.pop("name")
        if type_name is None:
            if dict_default_cls is not None:
                return instantiate_component(dict_default_cls, kwargs, optional_defaults)
            if dict_requires_type:
                raise ValueError(f"{spec_name} dict must have a 'type' key with the class full name")
            raise ValueError(f"{spec_name} dict has no 'type' key and no default class applies.")
        if not isinstance(type_name, str):
            if inspect.isclass(type_name) or callable(type_name):
                return instantiate_component(type_name, kwargs, optional_defaults)
            raise TypeError(
                f"{spec_name} 'type' must be a name, an import path or a class, got {type_name!r}."
            )
        local = _resolve_name(type_name, registry)
        if local is not None:
            return instantiate_component(local, kwargs, optional_defaults)
        return _create(type_name, kwargs, registry, optional_defaults)
    raise TypeError(f"{spec_name} spec must be a string or a dict, got {type(spec).__name__}.")


def _format(template: str | None, fallback: str, **values: Any) -> str:
    if template is None:
        return fallback
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError):
        return template


@overload
def build_component(
    spec: Any,
    *,
    expected_type: type[T],
    spec_name: str,
    default_factory: Callable[[], T] | None = None,
    allow_none: Literal[False] = False,
    optional_defaults: Mapping[str, Any] | None = None,
    dict_requires_type: bool = True,
    dict_default_cls: Callable[..., Any] | None = None,
    type_error_fmt: str | None = None,
    invalid_spec_error_fmt: str | None = None,
    registry: LocalRegistry | str | Registry[Any] | None = None,
) -> T: ...
@overload
def build_component(
    spec: Any,
    *,
    expected_type: type[T],
    spec_name: str,
    default_factory: Callable[[], T] | None = None,
    allow_none: bool,
    optional_defaults: Mapping[str, Any] | None = None,
    dict_requires_type: bool = True,
    dict_default_cls: Callable[..., Any] | None = None,
    type_error_fmt: str | None = None,
    invalid_spec_error_fmt: str | None = None,
    registry: LocalRegistry | str | Registry[Any] | None = None,
) -> T | None: ...
def build_component(
    spec: Any,
    *,
    expected_type: type[T],
    spec_name: str,
    default_factory: Callable[[], T] | None = None,
    allow_none: bool = False,
    optional_defaults: Mapping[str, Any] | None = None,
    dict_requires_type: bool = True,
    dict_default_cls: Callable[..., Any] | None = None,
    type_error_fmt: str | None = None,
    invalid_spec_error_fmt: str | None = None,
    registry: LocalRegistry | str | Registry[Any] | None = None,
) -> T | None:
    """Build the ``spec_name`` component from ``spec``, resolved in this order:

    1. an instance of ``expected_type``: returned as is;
    2. None: ``default_factory()``, or None when ``allow_none``, else ``ValueError``;
    3. a subclass of ``expected_type``: instantiated with the optional defaults it accepts;
    4. any other callable (a factory): called with the optional defaults it accepts;
    5. a string or a dict: :func:`instantiate_from_spec` (``registry`` may be a plugin kind such as
       ``"tracer"``, a `Registry`, or a local ``{name: class}`` mapping tried first).

    ``type_error_fmt`` and ``invalid_spec_error_fmt`` may use ``{spec_name}``, ``{expected_type}``,
    ``{type_name}``, ``{actual_type}`` (the spec's type, as in 0.3) and ``{spec}``.

    Raises:
        TypeError: the result is not an ``expected_type``.
        ValueError: None without a default, or a spec of an unsupported kind.
    """
    fmt_values = {
        "spec_name": spec_name,
        "expected_type": expected_type.__name__,
        "type_name": type(spec).__name__,
        "actual_type": type(spec),  # 0.3's placeholder of invalid_spec_error_fmt
        "spec": spec,
    }
    if isinstance(spec, expected_type):
        return spec
    if spec is None:
        if default_factory is not None:
            result: Any = default_factory()
        elif allow_none:
            return None
        else:
            raise ValueError(f"{spec_name} must be provided (got None and there is no default).")
    elif inspect.isclass(spec):
        if not issubclass(spec, expected_type):
            raise TypeError(
                _format(
                    type_error_fmt,
                    f"{spec_name} class {spec.__qualname__} is not a subclass of {expected_type.__name__}.",
                    **fmt_values,
                )
            )
        result = instantiate_component(spec, None, optional_defaults)
    elif isinstance(spec, (str, Mapping)):
        result = instantiate_from_spec(
            spec,
            spec_name=spec_name,
            optional_defaults=optional_defaults,
            dict_requires_type=dict_requires_type,
            dict_default_cls=dict_default_cls,
            registry=registry,
        )
    elif callable(spec):
        result = instantiate_component(spec, None, optional_defaults)
    else:
        raise ValueError(
            _format(
                invalid_spec_error_fmt,
                f"Invalid {spec_name} spec {spec!r} ({type(spec).__name__}): pass a {expected_type.__name__} "
                "instance, a class, a factory, a registered name, an import path or a dict with 'type'.",
                **fmt_values,
            )
        )
    if not isinstance(result, expected_type):
        fmt_values["type_name"] = type(result).__name__
        raise TypeError(
            _format(
                type_error_fmt,
                f"{spec_name} spec {spec!r} produced {type(result).__name__}, which is not a "
                f"{expected_type.__name__}.",
                **fmt_values,
            )
        )
    return result
