"""Registries: component name -> lazily imported implementation.

There is one :class:`Registry` per component kind (algorithm, runner, tracer, adapter, store,
strategy).
Plugins fill them through the ``agl_register_*`` hooks; users pick implementations by name.
A target is a ``"module:attr"`` string, imported only on first use, or a callable.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Generic, TypeVar

from agl_core.errors import (
    ComponentSpecError,
    MissingRequirementError,
    PluginConflictError,
    UnknownComponentError,
)

T = TypeVar("T")

COMPONENT_KINDS: tuple[str, ...] = ("algorithm", "runner", "tracer", "adapter", "store", "strategy")
"""The component kinds a plugin can register, one registry each."""


def kind_plural(kind: str) -> str:
    """The plural of a component kind (``"strategy"`` -> ``"strategies"``), as in hook names and messages."""
    return f"{kind[:-1]}ies" if kind.endswith("y") else f"{kind}s"


FIRST_PARTY_PLUGINS: dict[tuple[str, str], str] = {
    ("algorithm", "apo"): "agl-apo",
    ("algorithm", "verl"): "agl-verl",
    ("algorithm", "sft"): "agl-unsloth",
    ("algorithm", "unsloth"): "agl-unsloth",
    ("algorithm", "tinker"): "agl-tinker",
    ("store", "mongo"): "agl-mongo",
    ("tracer", "agentops"): "agl-agentops",
    ("strategy", "ray"): "agl-ray",
}
"""Names provided by first-party plugins, so a missing one gets an install hint."""

FIRST_PARTY_SCHEMES: dict[str, str] = {"mongodb": "agl-mongo", "mongodb+srv": "agl-mongo"}
"""Store URI schemes provided by first-party plugins."""

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.+-]*$")
_TARGET_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


@lru_cache(maxsize=512)
def missing_requirements(requires: tuple[str, ...]) -> tuple[str, ...]:
    """Return the requirement strings in ``requires`` that the environment does not satisfy.

    Checked with :mod:`importlib.metadata` only, so nothing is imported.
    """
    from importlib.metadata import PackageNotFoundError, version

    from packaging.requirements import InvalidRequirement, Requirement

    missing: list[str] = []
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            missing.append(text)
            continue
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            installed = version(req.name)
        except PackageNotFoundError:
            missing.append(text)
            continue
        if req.specifier and not req.specifier.contains(installed, prereleases=True):
            missing.append(f"{text} (found {installed})")
    return tuple(missing)


def import_target(target: str) -> Any:
    """Import ``"package.module:attr.path"`` and return the attribute."""
    module_name, _, attr_path = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr_path.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass
class RegistryEntry(Generic[T]):
    """One registered implementation: where it comes from and how to load it."""

    kind: str
    name: str
    target: str | Callable[..., T]
    summary: str = ""
    requires: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    schemes: tuple[str, ...] = ()
    plugin: str = "core"
    distribution: str | None = None
    _loaded: Any = field(default=None, repr=False)

    @property
    def target_name(self) -> str:
        """The target as text (``module:attr`` or the callable's qualified name)."""
        if isinstance(self.target, str):
            return self.target
        module = getattr(self.target, "__module__", "?")
        return f"{module}:{getattr(self.target, '__qualname__', repr(self.target))}"

    @property
    def missing(self) -> tuple[str, ...]:
        """Requirements of this entry that are not installed."""
        return missing_requirements(self.requires)

    @property
    def available(self) -> bool:
        """True when every requirement is installed."""
        return not self.missing

    def load(self) -> Callable[..., T]:
        """Import (once) and return the implementation class or factory."""
        if self._loaded is not None:
            return self._loaded
        if not isinstance(self.target, str):
            self._loaded = self.target
            return self._loaded
        missing = self.missing
        if missing:
            raise MissingRequirementError(
                f"{self.kind} {self.name!r} (from {self.distribution or self.plugin}) needs "
                f"{', '.join(missing)}, which is not installed. "
                f"Install it, e.g.: pip install {' '.join(repr(m.split(' (')[0]) for m in missing)}"
            )
        try:
            self._loaded = import_target(self.target)
        except ImportError as exc:
            raise MissingRequirementError(
                f"Could not import {self.kind} {self.name!r} from {self.target!r} "
                f"(plugin {self.plugin!r}, distribution {self.distribution or 'unknown'}): {exc}"
            ) from exc
        except AttributeError as exc:
            raise ComponentSpecError(
                f"{self.kind} {self.name!r}: target {self.target!r} does not exist ({exc}). "
                f"This is a bug in plugin {self.plugin!r}."
            ) from exc
        return self._loaded

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description (used by ``agl plugins list --json``)."""
        return {
            "kind": self.kind,
            "name": self.name,
            "aliases": list(self.aliases),
            "schemes": list(self.schemes),
            "summary": self.summary,
            "target": self.target_name,
            "requires": list(self.requires),
            "available": self.available,
            "missing": list(self.missing),
        }


class Registry(Generic[T]):
    """Named implementations of one component kind.

    Plugins call :meth:`add` from their ``agl_register_<kind>s`` hook; the core and users call
    :meth:`create` to build a component from a name, a ``{"type": name, ...}`` dict, a class, a
    factory or an existing instance.
    """

    def __init__(
        self,
        kind: str,
        *,
        base: type | None = None,
        hint: Callable[[str, str], str | None] | None = None,
        on_miss: Callable[[], bool] | None = None,
    ) -> None:
        self.kind = kind
        self._on_miss = on_miss
        self.base = base
        self._entries: dict[str, RegistryEntry[T]] = {}
        self._aliases: dict[str, str] = {}
        self._schemes: dict[str, str] = {}
        self._current: tuple[str, str | None] = ("core", "agl-core")
        self._hint = hint

    # -- registration ------------------------------------------------------------------------

    @contextmanager
    def registering(self, plugin: str, distribution: str | None) -> Iterator[None]:
        """Attribute every :meth:`add` inside the block to ``plugin`` (used by the loader)."""
        previous = self._current
        self._current = (plugin, distribution)
        try:
            yield
        finally:
            self._current = previous

    def add(
        self,
        name: str,
        target: str | Callable[..., T],
        *,
        summary: str = "",
        requires: Sequence[str] = (),
        aliases: Sequence[str] = (),
        schemes: Sequence[str] = (),
    ) -> None:
        """Register ``target`` under ``name``.

        Args:
            name: lowercase name users pick it by (``"apo"``).
            target: ``"module:attr"`` (imported on first use) or a class/factory.
            summary: one line shown by ``agl plugins list``.
            requires: requirement strings (``"verl>=0.9"``) checked without importing.
            aliases: other names for the same implementation.
            schemes: URI schemes this store opens (stores only), e.g. ``["sqlite"]``.

        Raises:
            PluginConflictError: the name, an alias or a scheme is already taken.
            ValueError: a malformed name or target.
        """
        plugin, distribution = self._current
        for label in (name, *aliases):
            if not isinstance(label, str) or not _NAME_RE.match(label):
                raise ValueError(
                    f"Invalid {self.kind} name {label!r} from plugin {plugin!r}: use lowercase letters, "
                    "digits, '_', '-', '.' or '+', starting with a letter or digit."
                )
        if isinstance(target, str):
            if not _TARGET_RE.match(target):
                raise ValueError(
                    f"Invalid target {target!r} for {self.kind} {name!r} from plugin {plugin!r}: "
                    "expected 'package.module:Attribute'."
                )
        elif not callable(target):
            raise ValueError(
                f"Target for {self.kind} {name!r} must be a 'module:attr' string or a callable, "
                f"got {type(target).__name__}."
            )
        if schemes and self.kind != "store":
            raise ValueError(f"Only stores can declare URI schemes ({self.kind} {name!r}).")
        for label in (name, *aliases):
            existing = self._owner_of(label)
            if existing is not None:
                raise PluginConflictError(self.kind, label, existing, (plugin, distribution))
        for scheme in schemes:
            if scheme in self._schemes:
                other = self._entries[self._schemes[scheme]]
                raise PluginConflictError("store URI scheme", scheme, other, (plugin, distribution))
        entry: RegistryEntry[T] = RegistryEntry(
            kind=self.kind,
            name=name,
            target=target,
            summary=summary,
            requires=tuple(requires),
            aliases=tuple(aliases),
            schemes=tuple(s.lower() for s in schemes),
            plugin=plugin,
            distribution=distribution,
        )
        self._entries[name] = entry
        for alias in aliases:
            self._aliases[alias] = name
        for scheme in entry.schemes:
            self._schemes[scheme] = name

    def _load_more(self) -> bool:
        """Ask the owner to load the plugins not loaded yet; True if it did (a lookup may retry)."""
        return self._on_miss() if self._on_miss is not None else False

    def _find(self, label: str) -> RegistryEntry[T] | None:
        entry = self._owner_of(label)
        if entry is None and self._load_more():
            entry = self._owner_of(label)
        return entry

    def _owner_of(self, label: str) -> RegistryEntry[T] | None:
        if label in self._entries:
            return self._entries[label]
        if label in self._aliases:
            return self._entries[self._aliases[label]]
        return None

    def remove_plugin(self, plugin: str) -> None:
        """Drop every entry that ``plugin`` registered (used to roll back a failed plugin)."""
        for name in [n for n, e in self._entries.items() if e.plugin == plugin]:
            entry = self._entries.pop(name)
            for alias in entry.aliases:
                self._aliases.pop(alias, None)
            for scheme in entry.schemes:
                self._schemes.pop(scheme, None)

    # -- lookup ------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Sorted registered names (aliases excluded); loads pending plugins first."""
        self._load_more()
        return sorted(self._entries)

    def entries(self) -> list[RegistryEntry[T]]:
        """Every entry, sorted by name."""
        return [self._entries[n] for n in self.names()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._find(name) is not None

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, name: str) -> RegistryEntry[T]:
        """The entry registered under ``name`` or an alias.

        Raises:
            UnknownComponentError: with the known names, a close match and an install hint.
        """
        entry = self._find(name)
        if entry is None:
            raise UnknownComponentError(self._unknown_message(name))
        return entry

    def scheme_entry(self, scheme: str) -> RegistryEntry[T]:
        """The store entry that opens URIs with ``scheme``."""
        scheme = scheme.lower()
        if scheme not in self._schemes:
            self._load_more()
        if scheme not in self._schemes:
            known = ", ".join(f"{s}:" for s in sorted(self._schemes)) or "none"
            message = f"No store opens URIs with scheme {scheme!r}. Known schemes: {known}."
            if scheme in FIRST_PARTY_SCHEMES:
                dist = FIRST_PARTY_SCHEMES[scheme]
                message += f" The {scheme!r} scheme comes from {dist}: pip install {dist}"
            raise UnknownComponentError(message)
        return self._entries[self._schemes[scheme]]

    def schemes(self) -> dict[str, str]:
        """Mapping of URI scheme to store name; loads pending plugins first."""
        self._load_more()
        return dict(self._schemes)

    def _unknown_message(self, name: str) -> str:
        known = self.names()
        registered = ", ".join(known) or "none"
        message = f"Unknown {self.kind} {name!r}. Registered {kind_plural(self.kind)}: {registered}."
        close = difflib.get_close_matches(name, known + list(self._aliases), n=1)
        if close:
            message += f" Did you mean {close[0]!r}?"
        if self._hint is not None:
            extra = self._hint(self.kind, name)
            if extra:
                message += " " + extra
        dist = FIRST_PARTY_PLUGINS.get((self.kind, name))
        if dist is not None:
            message += f" The {self.kind} {name!r} is provided by the {dist} plugin: pip install {dist}"
        return message

    # -- construction ------------------------------------------------------------------------

    def resolve(self, name: str) -> Callable[..., T]:
        """Load the class or factory registered under ``name``."""
        return self.get(name).load()

    def create(
        self,
        spec: Any,
        /,
        *,
        defaults: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> T:
        """Build a component from ``spec``.

        ``spec`` may be:

        * an instance of the registry's base type: returned as is (``kwargs`` are not allowed);
        * a registered name or alias (``"apo"``), an import path (``"pkg.mod:Class"``), or for
          stores a URI whose scheme is registered (``"sqlite:///run.db"``);
        * a dict ``{"type": <name or import path>, **constructor_kwargs}``;
        * a class: instantiated;
        * any other callable (a factory): called.

        ``kwargs`` are passed to the constructor; ``defaults`` are passed only when the
        constructor accepts them and the caller did not set them.
        """
        if self.base is not None and isinstance(spec, self.base):
            if kwargs:
                raise ComponentSpecError(
                    f"Got a ready {self.kind} instance ({type(spec).__name__}) together with "
                    f"constructor arguments {sorted(kwargs)}; pass one or the other."
                )
            return spec
        if isinstance(spec, str):
            factory, uri = self._factory_from_string(spec)
            if uri is not None:
                opener = getattr(factory, "from_uri", None)
                if opener is None:
                    raise ComponentSpecError(
                        f"{self.kind} {factory!r} is registered for URI {uri!r} but has no from_uri()."
                    )
                return self._check(opener(uri, **kwargs), spec)
            return self._check(_instantiate(factory, kwargs, defaults), spec)
        if isinstance(spec, Mapping):
            spec_kwargs = dict(spec)
            type_name = spec_kwargs.pop("type", None) or spec_kwargs.pop("name", None)
            if not isinstance(type_name, str):
                raise ComponentSpecError(
                    f"A {self.kind} dict must have a 'type' key naming a registered {self.kind} "
                    f"({', '.join(self.names()) or 'none registered'}) or an import path "
                    f"'package.module:Class'; got keys {sorted(spec)}."
                )
            spec_kwargs.update(kwargs)
            return self.create(type_name, defaults=defaults, **spec_kwargs)
        if inspect.isclass(spec):
            if self.base is not None and not issubclass(spec, self.base):
                raise ComponentSpecError(
                    f"{spec.__qualname__} is not a {self.base.__name__} subclass, so it cannot be "
                    f"used as a {self.kind}."
                )
            return self._check(_instantiate(spec, kwargs, defaults), spec)
        if callable(spec):
            return self._check(_instantiate(spec, kwargs, defaults), spec)
        raise ComponentSpecError(
            f"Cannot build a {self.kind} from {type(spec).__name__} {spec!r}: pass an instance, a "
            f"registered name ({', '.join(self.names()) or 'none registered'}), a dict with 'type', "
            "a class or a factory."
        )

    def _factory_from_string(self, spec: str) -> tuple[Callable[..., T], str | None]:
        entry = self._owner_of(spec)
        if entry is not None:
            return entry.load(), None
        scheme, sep, _ = spec.partition(":")
        if sep and scheme.lower() in self._schemes:
            return self._entries[self._schemes[scheme.lower()]].load(), spec
        if _TARGET_RE.match(spec):
            try:
                return import_target(spec), None
            except (ImportError, AttributeError) as exc:
                raise ComponentSpecError(f"Cannot import {self.kind} {spec!r}: {exc}") from exc
        self._load_more()
        entry = self._owner_of(spec)
        if entry is not None:
            return entry.load(), None
        if sep and self._schemes and scheme.lower() in self._schemes:
            return self._entries[self._schemes[scheme.lower()]].load(), spec
        if _TARGET_RE.match(spec):
            try:
                return import_target(spec), None
            except (ImportError, AttributeError) as exc:
                raise ComponentSpecError(f"Cannot import {self.kind} {spec!r}: {exc}") from exc
        if self.kind == "store" and sep:
            self.scheme_entry(scheme)  # raises with the known schemes and an install hint
        raise UnknownComponentError(self._unknown_message(spec))

    def _check(self, obj: Any, spec: Any) -> T:
        if self.base is not None and not isinstance(obj, self.base):
            raise ComponentSpecError(
                f"{self.kind} spec {spec!r} produced {type(obj).__name__}, which is not a "
                f"{self.base.__name__}."
            )
        return obj


def _instantiate(
    factory: Callable[..., Any], kwargs: Mapping[str, Any], defaults: Mapping[str, Any] | None
) -> Any:
    """Call ``factory`` with ``kwargs`` plus the ``defaults`` its signature accepts."""
    call_kwargs = dict(kwargs)
    if defaults:
        try:
            params = inspect.signature(factory).parameters
        except (TypeError, ValueError):
            params = {}
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        for key, value in defaults.items():
            if key not in call_kwargs and (takes_any or key in params):
                call_kwargs[key] = value() if callable(value) and not inspect.isclass(value) else value
    return factory(**call_kwargs)
