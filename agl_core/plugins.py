"""Plugin discovery and isolation.

Plugins are found through entry points in group ``agl``. Each one is imported, validated and
registered on its own (the registration hooks are pluggy historic hooks, called as the plugin
registers): a plugin that fails to import, uses an unknown hook or argument, raises while
registering, or claims a name another plugin owns is rolled back and recorded with the stage where
it failed. The core and every other plugin keep working.

Third-party plugins are imported only when a call needs them: the process-wide manager registers
the core's built-ins at once and loads entry points on the first lookup the built-ins cannot answer
(an unknown name or scheme, a listing of every component, an unknown ``agl`` subcommand). A plugin
that raises any exception at import or registration -- ``SystemExit`` and other ``BaseException`` subclass
included -- is isolated and reported; only a real Ctrl-C (SIGINT) still interrupts.

Environment switches:

* ``AGL_PLUGINS_STRICT=1``: raise :class:`~agl_core.errors.PluginLoadError` instead of recording.
* ``AGL_DISABLE_PLUGINS=a,b``: skip these plugins (entry-point or distribution names);
  ``*`` skips every third-party plugin. The names are blocked in pluggy (``set_blocked``), so a plugin
  registered directly under one is refused too.
* ``AGL_LOAD_PLUGINS=a,b``: load only these; an empty value loads none.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import inspect
import logging
import os
import signal
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import pluggy

import agl_core.hookspecs as hookspecs
from agl_core.errors import PluginLoadError
from agl_core.registry import (
    COMPONENT_BASES,
    COMPONENT_KINDS,
    Registries,
    Registry,
    RegistryEntry,
    declared_install,
    kind_plural,
)

if TYPE_CHECKING:
    import click


logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = hookspecs.PROJECT_NAME
STRICT_ENV = "AGL_PLUGINS_STRICT"
DISABLE_ENV = "AGL_DISABLE_PLUGINS"
LOAD_ENV = "AGL_LOAD_PLUGINS"

PluginStatus = Literal["ok", "failed", "disabled"]

_REGISTER_HOOKS: dict[str, str] = {f"agl_register_{kind_plural(kind)}": kind for kind in COMPONENT_KINDS}
_KNOWN_HOOKS = (*_REGISTER_HOOKS, "agl_register_commands")


class EntryPointLike(Protocol):
    """What the loader needs from an entry point (``importlib.metadata.EntryPoint`` fits)."""

    @property
    def name(self) -> str:
        """The entry point's name (the plugin's name)."""

    @property
    def value(self) -> str:
        """The ``module:attr`` the entry point names."""

    def load(self) -> Any:
        """Import and return the plugin object."""


@dataclass
class PluginFailure:
    """Why a plugin failed: the exception and the stage it happened in."""

    type: str
    message: str
    stage: str
    hint: str | None = None
    traceback: str = field(default="", repr=False)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (the traceback is left out)."""
        return {"type": self.type, "message": self.message, "stage": self.stage, "hint": self.hint}


@dataclass
class PluginRecord:
    """What the loader knows about one plugin."""

    name: str
    distribution: str | None = None
    version: str | None = None
    status: PluginStatus = "ok"
    builtin: bool = False
    hooks: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    error: PluginFailure | None = None
    disabled_reason: str | None = None
    load_seconds: float | None = None
    """Seconds spent importing and registering the plugin (None: not loaded)."""
    api_version: Any = None
    """The contract version the plugin declares it was built for (its ``AGL_PLUGIN_API_VERSION``)."""

    @property
    def api_mismatch(self) -> str | None:
        """Why the declared contract version does not fit this core; None when it fits or is undeclared."""
        declared = self.api_version
        if declared is None or self.builtin:
            return None
        if not isinstance(declared, int) or isinstance(declared, bool):
            return (
                f"declares {hookspecs.PLUGIN_API_VERSION_ATTRIBUTE} = {declared!r}; it must be an integer "
                f"(this agl-core speaks plugin contract {hookspecs.PLUGIN_API_VERSION})"
            )
        if declared < hookspecs.PLUGIN_API_VERSION:
            return (
                f"was built for plugin contract {declared}, this agl-core speaks "
                f"{hookspecs.PLUGIN_API_VERSION}; upgrade the plugin (the hooks' notes in agl_core.hookspecs "
                "say what changed)"
            )
        if declared > hookspecs.PLUGIN_API_VERSION:
            return (
                f"was built for plugin contract {declared}, newer than this agl-core's "
                f"{hookspecs.PLUGIN_API_VERSION}; upgrade agl-core"
            )
        return None


def _core_version() -> str:
    """``agl_core.__version__``, read from the loaded package (importing the facade here is a cycle)."""
    return str(sys.modules["agl_core"].__version__)


def _env_list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


TRACEBACK_HINT = "`agl --debug plugins list` prints the traceback"
"""How a user sees a failed plugin's traceback (the CLI's hint texts end with it)."""


def _install_hint(exc: BaseException, distribution: str | None) -> str:
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".")[0]
        if top == (distribution or "").replace("-", "_"):
            return f"reinstall {distribution}; {TRACEBACK_HINT}"
        declared = declared_install(distribution, top)
        if declared is not None:
            fix = f"pip install '{declared}'"
        else:
            fix = f"install the distribution that provides the module {top!r}"
            if distribution:
                fix += f" (see {distribution}'s install notes)"
        return f"{fix}; {TRACEBACK_HINT}"
    return TRACEBACK_HINT


def _named_like(record: PluginRecord, wanted: str) -> bool:
    """Whether ``wanted`` is the plugin's entry-point name or its distribution name (without ``agl-``)."""
    names = {record.name, (record.distribution or "").removeprefix("agl-")}
    return wanted.lower() in {name.lower() for name in names}


def _failure_text(record: PluginRecord) -> str:
    """``Type at stage: first line of the message`` for a failed plugin."""
    error = record.error
    if error is None:
        return "unknown error"
    first = error.message.splitlines()[0] if error.message else ""
    return f"{error.type} at {error.stage}" + (f": {first}" if first else "")


class _SigintWatch:
    """Tells a real Ctrl-C apart from a ``KeyboardInterrupt`` a plugin raised itself."""

    def __init__(self) -> None:
        self.received = False

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Note SIGINTs delivered inside the block (main thread only; elsewhere none can arrive)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        try:
            previous = signal.getsignal(signal.SIGINT)
        except ValueError:  # pragma: no cover - no signal support
            yield
            return

        def note(signum: int, frame: Any) -> None:
            self.received = True
            if callable(previous):
                previous(signum, frame)
            else:
                raise KeyboardInterrupt

        try:
            signal.signal(signal.SIGINT, note)
        except ValueError:  # pragma: no cover - not the main interpreter
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


def _reraise_if_interrupt(exc: BaseException, watch: _SigintWatch) -> None:
    """Re-raise ``exc`` when it is a real Ctrl-C; a plugin's own ``BaseException`` is isolated."""
    if isinstance(exc, KeyboardInterrupt) and watch.received:
        raise exc


@dataclass(frozen=True)
class TargetProblem:
    """A registered component whose target cannot be imported or is not of its kind."""

    kind: str
    name: str
    plugin: str
    distribution: str | None
    message: str


def _target_problem(entry: RegistryEntry[Any], base: type | None) -> str | None:
    """Why ``entry``'s target cannot build a component of its kind (None when it can)."""
    try:
        target = entry.load()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    if inspect.isclass(target):
        if base is not None and not issubclass(target, base):
            return (
                f"{entry.target_name} is a class but not a {base.__module__}.{base.__qualname__} subclass, "
                f"so it cannot be used as a {entry.kind}"
            )
        return None
    if not callable(target):
        return f"{entry.target_name} is a {type(target).__name__}, not a class or a factory"
    return None


class PluginManager:
    """Loads plugins, isolates failures and owns one :class:`Registry` per component kind.

    Args:
        strict: raise on the first plugin failure (default: ``AGL_PLUGINS_STRICT``).
        builtins: register the core's built-in components (memory/SQLite stores, ...).
        autoload: load the installed entry points the first time a lookup misses (what the
            process-wide manager does); otherwise only :meth:`load_entrypoints` loads them.
    """

    def __init__(self, *, strict: bool | None = None, builtins: bool = True, autoload: bool = False) -> None:
        self.strict = _truthy(os.environ.get(STRICT_ENV)) if strict is None else strict
        self._pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        self.registries = Registries(
            **{
                kind: Registry(
                    kind, base=COMPONENT_BASES[kind], hint=self._failure_hint, on_miss=self.ensure_entrypoints
                )
                for kind in COMPONENT_KINDS
            }
        )
        """The component registries, typed by kind (``manager.registries.store``)."""
        self._records: dict[str, PluginRecord] = {}
        self._lock = threading.RLock()
        self._autoload = autoload
        self._entrypoints_loaded = False
        # plugin names whose commands each click group already has (a process may build several groups)
        self._commands_added: weakref.WeakKeyDictionary[click.Group, set[str]] = weakref.WeakKeyDictionary()
        self._sigint = _SigintWatch()
        self._stage = "validate"
        """Where the plugin being registered is: ``validate`` or the registration hook pluggy is calling."""
        self._pm.add_hookcall_monitoring(self._entering_hook, self._leaving_hook)
        for blocked in _env_list(os.environ.get(DISABLE_ENV, "")):  # pluggy refuses these names for good
            if blocked not in ("*", "core"):
                self._pm.set_blocked(blocked)
        for hook_name, kind in _REGISTER_HOOKS.items():  # historic: every later plugin gets the same call
            getattr(self._pm.hook, hook_name).call_historic(
                kwargs={"registry": self.registries.of_kind(kind)},
                result_callback=functools.partial(self._refuse_returned, hook_name, kind),
            )
        if builtins:
            import agl_core._builtins as _builtins  # not ``from agl_core``: the facade imports this module

            version = _core_version()
            self.register(_builtins, name="core", distribution="agl-core", version=version, builtin=True)

    # -- public API --------------------------------------------------------------------------

    def registry(self, kind: str) -> Registry[Any]:
        """The registry of a kind held as data (``"algorithm"``, ``"store"``); typed: :attr:`registries`."""
        return self.registries.of_kind(kind)

    def records(self) -> list[PluginRecord]:
        """Every plugin the manager has seen (ok, failed or disabled), built-ins first."""
        return sorted(self._records.values(), key=lambda r: (not r.builtin, r.name))

    def record(self, name: str) -> PluginRecord:
        """The record of one plugin."""
        return self._records[name]

    def provides(self, name: str) -> list[dict[str, Any]]:
        """Components and commands a plugin registered."""
        items = [
            entry.describe()
            for registry in self.registries.all()
            for entry in registry.entries()
            if entry.plugin == name
        ]
        record = self._records.get(name)
        if record is not None:
            items.extend({"kind": "command", "name": cmd} for cmd in record.commands)
        return items

    def register(
        self,
        plugin: Any,
        name: str | None = None,
        *,
        distribution: str | None = None,
        version: str | None = None,
        builtin: bool = False,
    ) -> PluginRecord:
        """Register one plugin object and run its registration hooks, isolated from the rest.

        Returns the plugin's record; on failure its status is ``failed`` (or, in strict mode,
        :class:`~agl_core.errors.PluginLoadError` is raised) and nothing it added remains.
        """
        name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        with self._lock:
            if name in self._records and self._records[name].status == "ok":
                raise ValueError(f"An agl plugin named {name!r} is already registered.")
            if not builtin and self._pm.is_blocked(name):
                record = PluginRecord(
                    name=name, distribution=distribution, version=version, status="disabled"
                )
                record.disabled_reason = f"{DISABLE_ENV}={os.environ.get(DISABLE_ENV, '')}"
                self._records[name] = record
                return record
            record = PluginRecord(
                name=name,
                distribution=distribution,
                version=version,
                builtin=builtin,
                api_version=getattr(plugin, hookspecs.PLUGIN_API_VERSION_ATTRIBUTE, None),
            )
            self._records[name] = record
            self._stage = "validate"
            started = time.perf_counter()
            try:
                with self._sigint.watching(), contextlib.ExitStack() as attributed:
                    self._check_hook_names(plugin, name)
                    for registry in self.registries.all():  # what the historic calls add is this plugin's
                        attributed.enter_context(registry.registering(name, distribution))
                    self._pm.register(plugin, name=name)  # validates, then calls its registration hooks
                    record.hooks = sorted(hc.name for hc in self._pm.get_hookcallers(plugin) or [])
            except BaseException as exc:
                _reraise_if_interrupt(exc, self._sigint)
                self._fail(record, plugin, self._stage, exc)
            record.load_seconds = (record.load_seconds or 0.0) + time.perf_counter() - started
            return record

    def load_entrypoints(self, entry_points: Iterable[EntryPointLike] | None = None) -> list[PluginRecord]:
        """Load third-party plugins from entry points (group ``agl``), honouring the env switches.

        Each plugin is imported and registered on its own; one that raises (``SystemExit`` and
        other ``BaseException`` subclasses included, but not a real Ctrl-C) is recorded as failed.
        """
        self._entrypoints_loaded = True
        if entry_points is None:
            from importlib.metadata import entry_points as _eps

            entry_points = list(_eps(group=ENTRY_POINT_GROUP))
        disabled = set(_env_list(os.environ.get(DISABLE_ENV, "")))
        allow_raw = os.environ.get(LOAD_ENV)
        allowed = set(_env_list(allow_raw)) if allow_raw is not None else None
        seen: set[str] = set()
        loaded: list[PluginRecord] = []
        for ep in entry_points:
            dist = getattr(ep, "dist", None)
            dist_name = getattr(dist, "name", None) if dist is not None else None
            dist_version = getattr(dist, "version", None) if dist is not None else None
            labels = {ep.name, *([dist_name] if dist_name else [])}
            seen |= labels
            if ep.name in self._records and self._records[ep.name].status == "ok":
                continue
            reason = None
            if "*" in disabled or labels & disabled:
                reason = f"{DISABLE_ENV}={os.environ.get(DISABLE_ENV, '')}"
            elif allowed is not None and not labels & allowed:
                reason = f"not in {LOAD_ENV}={allow_raw}"
            if reason is not None:
                if reason.startswith(DISABLE_ENV):
                    self._pm.set_blocked(ep.name)
                record = PluginRecord(
                    name=ep.name,
                    distribution=dist_name,
                    version=dist_version,
                    status="disabled",
                    disabled_reason=reason,
                )
                self._records[ep.name] = record
                loaded.append(record)
                continue
            started = time.perf_counter()
            try:
                with self._sigint.watching():
                    module = ep.load()
            except BaseException as exc:
                _reraise_if_interrupt(exc, self._sigint)
                record = PluginRecord(name=ep.name, distribution=dist_name, version=dist_version)
                record.load_seconds = time.perf_counter() - started
                self._records[ep.name] = record
                self._fail(record, None, "import", exc)
                loaded.append(record)
                continue
            imported = time.perf_counter() - started
            record = self.register(module, name=ep.name, distribution=dist_name, version=dist_version)
            record.load_seconds = (record.load_seconds or 0.0) + imported
            loaded.append(record)
        for wanted in sorted((allowed or set()) - seen):
            logger.warning("agl: plugin %r from %s could not be found", wanted, LOAD_ENV)
        return loaded

    def ensure_entrypoints(self) -> bool:
        """Load the installed entry points once, if this manager autoloads; True if it loaded now."""
        with self._lock:
            if not self._autoload or self._entrypoints_loaded:
                return False
            self.load_entrypoints()
            return True

    @property
    def entrypoints_loaded(self) -> bool:
        """Whether third-party entry points have been loaded (or loading was asked for)."""
        return self._entrypoints_loaded

    def add_commands(self, cli: click.Group, *, builtin_only: bool = False) -> None:
        """Let every healthy plugin add its subcommands to ``cli``, one plugin at a time.

        A plugin adds its commands once per group; ``builtin_only`` skips third-party plugins.
        """
        added_to_cli = self._commands_added.setdefault(cli, set())
        for record in self.records():
            if record.status != "ok" or "agl_register_commands" not in record.hooks:
                continue
            if (builtin_only and not record.builtin) or record.name in added_to_cli:
                continue
            added_to_cli.add(record.name)
            before = dict(cli.commands)
            try:
                with self._sigint.watching():
                    self._call_commands_hook(record.name, cli)
                    self._check_no_command_replaced(record.name, cli, before)
            except BaseException as exc:
                _reraise_if_interrupt(exc, self._sigint)
                for added in set(cli.commands) - set(before):
                    cli.commands.pop(added, None)
                cli.commands.update(before)  # a replaced command gets its owner's back
                self._fail(record, self._pm.get_plugin(record.name), "agl_register_commands", exc)
                continue
            record.commands = sorted(set(cli.commands) - set(before))

    def unregister(self, name: str) -> None:
        """Remove a plugin and everything it registered."""
        with self._lock:
            plugin = self._pm.get_plugin(name)
            if plugin is not None:
                self._pm.unregister(name=name)
            for registry in self.registries.all():
                registry.remove_plugin(name)
            self._records.pop(name, None)
            for names in self._commands_added.values():
                names.discard(name)

    def check_targets(self) -> list[TargetProblem]:
        """Import every registered target whose requirements are installed and check it is of its kind.

        A class must subclass its kind's base class; any other target must be callable (a factory).
        Components whose ``requires`` are missing are left out: ``agl plugins check`` reports those apart.
        """
        problems = []
        for registry in self.registries.all():
            base = registry.base
            for entry in registry.entries():
                if entry.missing:
                    continue
                message = _target_problem(entry, base)
                if message is not None:
                    problems.append(
                        TargetProblem(entry.kind, entry.name, entry.plugin, entry.distribution, message)
                    )
        return problems

    def failures(self) -> list[PluginRecord]:
        """Records of plugins that failed."""
        return [r for r in self.records() if r.status == "failed"]

    # -- internals ---------------------------------------------------------------------------

    def _check_hook_names(self, plugin: Any, name: str) -> None:
        for attr in dir(plugin):
            if attr in _KNOWN_HOOKS and self._pm.parse_hookimpl_opts(plugin, attr) is None:
                raise pluggy.PluginValidationError(
                    plugin,
                    f"{attr} in plugin {name!r} is not marked as a hook implementation, so agl would never "
                    "call it; decorate it with @agl_core.hookimpl.",
                )
            if attr.startswith("agl_register") and attr not in _KNOWN_HOOKS:
                close = difflib.get_close_matches(attr, _KNOWN_HOOKS, n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise pluggy.PluginValidationError(
                    plugin,
                    f"unknown hook {attr!r} in plugin {name!r}.{hint} "
                    f"Known hooks: {', '.join(_KNOWN_HOOKS)}.",
                )

    def _check_no_command_replaced(self, plugin_name: str, cli: click.Group, before: dict[str, Any]) -> None:
        """Raise when a plugin's ``agl_register_commands`` replaced a command that was already there."""
        replaced = sorted(name for name, command in before.items() if cli.commands.get(name) is not command)
        if not replaced:
            return
        owners = {
            name: next((r.name for r in self._records.values() if name in r.commands), "core")
            for name in replaced
        }
        taken = ", ".join(
            f"{name!r} ({'built in' if owners[name] == 'core' else 'from plugin ' + repr(owners[name])})"
            for name in replaced
        )
        raise pluggy.PluginValidationError(
            self._pm.get_plugin(plugin_name),
            f"plugin {plugin_name!r} adds the command(s) {taken}, which already exist; rename its command(s) "
            "(e.g. prefix them with the plugin's name) or make them subcommands of one group.",
        )

    def _entering_hook(self, hook_name: str, hook_impls: Any, kwargs: Any) -> None:
        self._stage = hook_name

    def _leaving_hook(self, outcome: Any, hook_name: str, hook_impls: Any, kwargs: Any) -> None:
        if outcome.exception is None:  # a raising hook keeps its name as the failure's stage
            self._stage = "validate"

    def _call_commands_hook(self, plugin_name: str, cli: click.Group) -> None:
        for impl in self._pm.hook.agl_register_commands.get_hookimpls():
            if impl.plugin_name == plugin_name:
                returned = impl.function(*[{"cli": cli}[arg] for arg in impl.argnames])
                self._refuse_returned("agl_register_commands", None, returned)

    def _refuse_returned(self, hook_name: str, kind: str | None, returned: Any) -> None:
        """Raise when a hook returned something: agl ignores return values, so it registered nothing."""
        if returned is None:
            return
        self._stage = hook_name
        how = f"registry.add(...) for each {kind}" if kind is not None else "cli.add_command(...)"
        raise pluggy.PluginValidationError(
            None,
            f"hook {hook_name} returned a {type(returned).__name__} instead of calling {how}; agl ignores "
            "return values, so it would register nothing. Call the registry (or cli) and return None.",
        )

    def _fail(self, record: PluginRecord, plugin: Any, stage: str, exc: BaseException) -> None:
        if self._pm.get_plugin(record.name) is not None:
            self._pm.unregister(name=record.name)
        elif plugin is not None and self._pm.is_registered(plugin):
            self._pm.unregister(plugin)
        for registry in self.registries.all():
            registry.remove_plugin(record.name)
        record.status = "failed"
        record.commands = []
        record.error = PluginFailure(
            type=type(exc).__name__,
            message=str(exc),
            stage=stage,
            hint=_install_hint(exc, record.distribution),
            traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        )
        if self.strict:
            raise PluginLoadError(record.name, record.distribution, stage, exc) from exc
        logger.warning(
            "agl: plugin %r (%s %s) failed at %s: %s: %s",
            record.name,
            record.distribution or "?",
            record.version or "?",
            stage,
            type(exc).__name__,
            exc,
        )

    def failure_note(self, wanted: str | None = None) -> str | None:
        """A sentence naming the plugins that failed to load (or are disabled), for a lookup that missed.

        A failed plugin named like ``wanted`` (a command, component or scheme, compared with its entry
        point and distribution names) is named as its likely provider. None when every plugin loaded.
        """
        failed = [r for r in self.records() if r.status == "failed"]
        if not failed:
            disabled = [f"{r.name} ({r.disabled_reason})" for r in self.records() if r.status == "disabled"]
            return f"Disabled plugins: {', '.join(disabled)}." if disabled else None
        likely = [r for r in failed if wanted and _named_like(r, wanted)]
        others = [r for r in failed if r not in likely]
        sentences = [
            f"Plugin {r.name!r} ({r.distribution or 'unknown distribution'}) may provide {wanted!r} but "
            f"failed to load: {_failure_text(r)}."
            for r in likely
        ]
        if others:
            listed = "; ".join(f"{r.name} ({_failure_text(r)})" for r in others)
            sentences.append(f"{'Other plugins' if likely else 'Plugins'} that failed to load: {listed}.")
        return " ".join([*sentences, "See `agl plugins list`."])

    def _failure_hint(self, kind: str, name: str) -> str | None:
        return self.failure_note(name)


_manager: PluginManager | None = None
_manager_lock = threading.Lock()


def get_plugin_manager() -> PluginManager:
    """The process-wide plugin manager, created on first use.

    It holds the built-ins at once and imports third-party plugins only when a lookup needs them
    (see :meth:`PluginManager.ensure_entrypoints`).
    """
    global _manager
    if _manager is None:
        with _manager_lock:
            if _manager is None:
                _manager = PluginManager(autoload=True)
    return _manager


def set_plugin_manager(manager: PluginManager | None) -> PluginManager | None:
    """Replace the process-wide manager (tests); returns the previous one."""
    global _manager
    with _manager_lock:
        previous, _manager = _manager, manager
    return previous


def get_registry(kind: str) -> Registry[Any]:
    """The process-wide registry of a kind held as data; :func:`get_registries` gives them typed."""
    return get_plugin_manager().registry(kind)


def get_registries() -> Registries:
    """The process-wide registries, typed by kind (``get_registries().store`` builds LightningStores)."""
    return get_plugin_manager().registries
