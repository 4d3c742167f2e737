"""Registries: component name -> lazily imported implementation.

There is one :class:`Registry` per component kind (algorithm, runner, tracer, adapter, store,
strategy).
Plugins fill them through the ``agl_register_*`` hooks; users pick implementations by name.
A target is a ``"module:attr"`` string, imported only on first use, or a callable.

This is the one place a spec becomes a component: ``Trainer``, the ``agl`` command line,
:func:`agl_core.store.open_store` and Agent Lightning 0.3's ``build_component`` all call
:meth:`Registry.create` (a store URI included: its scheme is parsed there, once). Each registry knows the base
class of its kind (``Registry[type[Algorithm]]`` builds ``Algorithm`` instances) and checks what it builds.
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
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from agl_core.errors import (
    ComponentSpecError,
    MissingRequirementError,
    PluginConflictError,
    UnknownComponentError,
)

if TYPE_CHECKING:
    from agl_core.adapter.base import Adapter
    from agl_core.algorithm.base import Algorithm
    from agl_core.execution.base import ExecutionStrategy
    from agl_core.runner.base import Runner
    from agl_core.store.base import LightningStore
    from agl_core.tracer.base import Tracer

T = TypeVar("T")

COMPONENT_KINDS: tuple[str, ...] = ("algorithm", "runner", "tracer", "adapter", "store", "strategy")
"""The component kinds a plugin can register, one registry each."""


def kind_plural(kind: str) -> str:
    """The plural of a component kind (``"strategy"`` -> ``"strategies"``), as in hook names and messages."""
    return f"{kind[:-1]}ies" if kind.endswith("y") else f"{kind}s"


FIRST_PARTY_PLUGINS: Mapping[tuple[str, str], str] = {
    ("algorithm", "apo"): "agl-apo",
    ("algorithm", "verl"): "agl-verl",
    ("algorithm", "sft"): "agl-unsloth",
    ("algorithm", "unsloth"): "agl-unsloth",
    ("algorithm", "tinker"): "agl-tinker",
    ("store", "mongo"): "agl-mongo",
    ("tracer", "agentops"): "agl-agentops",
    ("strategy", "ray"): "agl-ray",
    ("store", "postgres"): "agl-postgres",
    ("tracer", "weave"): "agl-weave",
}
"""Names provided by first-party plugins, so a missing one gets an install hint.

The plugin manager seeds every registry with these; a plugin extends the hints with
:meth:`Registry.add_install_hint`.
"""

FIRST_PARTY_SCHEMES: Mapping[str, str] = {
    "mongodb": "agl-mongo",
    "mongodb+srv": "agl-mongo",
    "postgresql": "agl-postgres",
    "postgres": "agl-postgres",
}
"""Store URI schemes provided by first-party plugins (seeded like :data:`FIRST_PARTY_PLUGINS`)."""

FIRST_PARTY_COMMANDS: Mapping[str, str] = {
    "agentops": "agl-legacy",
    "prometheus": "agl-legacy",
    "vllm": "agl-legacy",
}
"""``agl`` subcommands provided by first-party plugins, so a missing one gets an install hint."""

COMPONENT_BASES: Mapping[str, str] = {
    "algorithm": "agl_core.algorithm.base:Algorithm",
    "runner": "agl_core.runner.base:Runner",
    "tracer": "agl_core.tracer.base:Tracer",
    "adapter": "agl_core.adapter.base:Adapter",
    "store": "agl_core.store.base:LightningStore",
    "strategy": "agl_core.execution.base:ExecutionStrategy",
}
"""The base class every component of a kind must be an instance of (imported when first needed)."""

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.+-]*$")
_TARGET_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_DOTTED_PATH_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
_URI_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")


def uri_scheme(text: str) -> str | None:
    """The lower-cased scheme of a URI (``"sqlite"`` for ``sqlite:///x.db``); None when it has none.

    The one parser of store URIs (RFC 3986 scheme syntax): :meth:`Registry.create` and
    :func:`agl_core.store.parse_store_uri` use it.
    """
    match = _URI_SCHEME_RE.match(text)
    return match.group(1).lower() if match is not None else None


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


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_install(distribution: str | None, name: str) -> str | None:
    """What to ``pip install`` to get the package ``name`` as ``distribution`` itself declares it.

    ``"agl-verl[verl]"`` when ``name`` is a requirement of one of the distribution's extras (so the
    plugin's own pins apply), the requirement (``"pymongo<5,>=4.10"``) when it is a plain dependency,
    None when the distribution is not installed or does not name it. Read from metadata; nothing is imported.
    """
    if not distribution:
        return None
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import InvalidRequirement, Requirement

    try:
        declared = requires(distribution) or []
    except PackageNotFoundError:
        return None
    extras: list[str] = []
    plain: str | None = None
    for text in declared:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if _canonical(requirement.name) != _canonical(name):
            continue
        extra = re.search(r"""extra\s*==\s*['"]([^'"]+)['"]""", str(requirement.marker or ""))
        if extra:
            extras.append(extra.group(1))
        elif plain is None:
            requirement.marker = None
            plain = str(requirement)
    # the extra named after the package, else the first one that is not for the plugin's own tests
    chosen = [e for e in extras if _canonical(e) == _canonical(name)] or [
        e for e in extras if e not in _TEST_EXTRAS
    ]
    if chosen:
        return f"{distribution}[{chosen[0]}]"
    return plain


_TEST_EXTRAS = frozenset({"test", "tests", "testing", "dev"})


def install_command(distribution: str | None, missing: Sequence[str]) -> str:
    """``pip install ...`` for unmet requirement strings, through ``distribution``'s extras if it has them."""
    targets: list[str] = []
    for text in missing:
        requirement = text.split(" (")[0]
        name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]
        target = declared_install(distribution, name) or requirement
        if target not in targets:
            targets.append(target)
    return "pip install " + " ".join(repr(t) for t in targets)


def import_target(target: str) -> Any:
    """Import ``"package.module:attr.path"`` (or the dotted ``"package.module.attr"``) and return it.

    Raises:
        ValueError: ``target`` names no module attribute.
        ImportError / AttributeError: the module or attribute does not exist.
    """
    if ":" not in target:
        module_name, _, attr = target.rpartition(".")
        if not module_name or not attr:
            raise ValueError(
                f"{target!r} is not an import path; use 'package.module.Class' or 'package.module:Class'."
            )
        return getattr(importlib.import_module(module_name), attr)
    module_name, _, attr_path = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr_path.split("."):
        obj = getattr(obj, part)
    return obj


def instantiate(
    factory: Callable[..., T], kwargs: Mapping[str, Any], defaults: Mapping[str, Any] | None
) -> T:
    """Call ``factory`` with ``kwargs`` plus each of ``defaults`` its signature accepts and ``kwargs`` lack.

    A callable default (not a class) is called to make the value, so it is built only when used.
    """
    call_kwargs = dict(kwargs)
    if defaults:
        try:
            params = inspect.signature(factory).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        for key, value in defaults.items():
            if key not in call_kwargs and (takes_any or key in params):
                call_kwargs[key] = value() if callable(value) and not inspect.isclass(value) else value
    return factory(**call_kwargs)


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
    _loaded: Callable[..., T] | None = field(default=None, repr=False)

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
                f"Install it, e.g.: {install_command(self.distribution, missing)}"
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
        base: type | str | None = None,
        hint: Callable[[str, str], str | None] | None = None,
        on_miss: Callable[[], bool] | None = None,
    ) -> None:
        self.kind = kind
        self._on_miss = on_miss
        self._base: type | str | None = base
        self._entries: dict[str, RegistryEntry[T]] = {}
        self._aliases: dict[str, str] = {}
        self._schemes: dict[str, str] = {}
        self._install_hints: dict[str, tuple[str, str]] = {}
        self._scheme_hints: dict[str, tuple[str, str]] = {}
        self._current: tuple[str, str | None] = ("core", "agl-core")
        self._hint = hint
        for (hint_kind, name), dist in FIRST_PARTY_PLUGINS.items():
            if hint_kind == kind:
                self._install_hints[name] = (dist, "core")
        if kind == "store":
            self._scheme_hints.update({s: (dist, "core") for s, dist in FIRST_PARTY_SCHEMES.items()})

    @property
    def base(self) -> type | None:
        """The class every component of this kind is an instance of (None: unchecked).

        Given as a ``"module:attr"`` string, it is imported the first time a spec is built.
        """
        if isinstance(self._base, str):
            self._base = import_target(self._base)
        return self._base  # type: ignore[return-value]

    @base.setter
    def base(self, value: type | str | None) -> None:
        self._base = value

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

    def add_install_hint(self, name: str, distribution: str, *, schemes: Sequence[str] = ()) -> None:
        """Name the distribution that provides ``name`` (and store URI ``schemes``) when it is missing.

        A lookup of a name nobody registered then ends with ``pip install <distribution>``. The core
        seeds :data:`FIRST_PARTY_PLUGINS` and :data:`FIRST_PARTY_SCHEMES`; a plugin may add its own
        family's names from its registration hook. The first hint for a name wins.
        """
        plugin = self._current[0]
        self._install_hints.setdefault(name, (distribution, plugin))
        for scheme in schemes:
            self._scheme_hints.setdefault(scheme.lower(), (distribution, plugin))

    def install_hint(self, name: str) -> str | None:
        """The distribution that provides ``name`` according to the install hints, if any."""
        hint = self._install_hints.get(name)
        return hint[0] if hint is not None else None

    def scheme_install_hint(self, scheme: str) -> str | None:
        """The distribution that opens store URIs with ``scheme`` according to the install hints, if any."""
        hint = self._scheme_hints.get(scheme.lower())
        return hint[0] if hint is not None else None

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
        for hints in (self._install_hints, self._scheme_hints):
            for label in [label for label, (_, owner) in hints.items() if owner == plugin]:
                del hints[label]

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
            extra = self._hint(self.kind, scheme) if self._hint is not None else None
            if extra:
                message += " " + extra
            dist = self.scheme_install_hint(scheme)
            if dist is not None:
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
        dist = self.install_hint(name)
        if dist is not None:
            message += f" The {self.kind} {name!r} is provided by the {dist} plugin: pip install {dist}"
        return message

    # -- construction ------------------------------------------------------------------------

    def resolve(self, name: str) -> Callable[..., T]:
        """Load the class or factory registered under ``name``."""
        return self.get(name).load()

    def create_named(self, name: str, /, *, defaults: Mapping[str, Any] | None = None, **kwargs: Any) -> T:
        """Build the component registered under ``name`` (or an alias), and nothing else.

        Never an import path, a URI or a callable: the one way a network request (a URL, a body) picks a
        component, so that no request can make the process import or call code it names.

        Raises:
            UnknownComponentError: ``name`` is not registered (the message lists the registered names).
        """
        return self._check(instantiate(self.resolve(name), kwargs, defaults), name)

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
            return cast("T", spec)
        if isinstance(spec, str):
            factory, is_uri = self._factory_from_string(spec)
            if is_uri:  # a store URI: the store's from_uri opens it (a plain factory is called with it)
                opener: Any = getattr(factory, "from_uri", None) or factory
                return self._check(opener(spec, **kwargs), spec)
            return self._check(instantiate(factory, kwargs, defaults), spec)
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
            return self._check(instantiate(spec, kwargs, defaults), spec)
        if callable(spec):
            return self._check(instantiate(spec, kwargs, defaults), spec)
        raise ComponentSpecError(
            f"Cannot build a {self.kind} from {type(spec).__name__} {spec!r}: pass an instance, a "
            f"registered name ({', '.join(self.names()) or 'none registered'}), a dict with 'type', "
            "a class or a factory."
        )

    def _factory_from_string(self, spec: str) -> tuple[Callable[..., T], bool]:
        """The factory a string names (a name, a store URI or an import path); True when it is a URI."""
        scheme = uri_scheme(spec) if self.kind == "store" else None  # parsed once, here
        for attempt in range(2):
            if attempt and not self._load_more():
                break
            entry = self._owner_of(spec)
            if entry is not None:
                return entry.load(), False
            if scheme is not None and scheme in self._schemes:
                return self._entries[self._schemes[scheme]].load(), True
            if _TARGET_RE.match(spec):
                return self._import(spec), False
        if _DOTTED_PATH_RE.match(spec):
            try:
                return self._import(spec), False
            except ComponentSpecError:
                pass  # not an import path after all: report the unknown name
        if scheme is not None:
            self.scheme_entry(scheme)  # raises with the known schemes and an install hint
        raise UnknownComponentError(self._unknown_message(spec))

    def _import(self, path: str) -> Callable[..., T]:
        try:
            return import_target(path)  # type: ignore[no-any-return]
        except (ImportError, AttributeError, ValueError) as exc:
            raise ComponentSpecError(f"Cannot import {self.kind} {path!r}: {exc}") from exc

    def _check(self, obj: object, spec: Any) -> T:
        """``obj`` when it is an instance of the registry's base class (always, with no base)."""
        if self.base is not None and not isinstance(obj, self.base):
            raise ComponentSpecError(
                f"{self.kind} spec {spec!r} produced {type(obj).__name__}, which is not a "
                f"{self.base.__name__}."
            )
        return cast("T", obj)


@dataclass(frozen=True)
class Registries:
    """One :class:`Registry` per component kind, typed by kind: ``registries.store`` builds LightningStores.

    Code that names its kind uses the attribute; code that holds a kind as data (a hook name, a CLI
    argument) uses :meth:`of_kind`.
    """

    algorithm: Registry[Algorithm]
    runner: Registry[Runner[Any]]
    tracer: Registry[Tracer]
    adapter: Registry[Adapter[Any, Any]]
    store: Registry[LightningStore]
    strategy: Registry[ExecutionStrategy]

    def of_kind(self, kind: str) -> Registry[Any]:
        """The registry of ``kind`` (``"algorithm"``, ``"store"``, ...).

        Raises:
            ValueError: ``kind`` is not one of :data:`COMPONENT_KINDS`.
        """
        if kind not in COMPONENT_KINDS:
            raise ValueError(
                f"Unknown component kind {kind!r}; expected one of {', '.join(COMPONENT_KINDS)}."
            )
        registry: Registry[Any] = getattr(self, kind)
        return registry

    def all(self) -> list[Registry[Any]]:
        """Every registry, in :data:`COMPONENT_KINDS` order."""
        return [self.of_kind(kind) for kind in COMPONENT_KINDS]
