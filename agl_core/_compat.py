"""Helpers of the Agent Lightning 0.3 compatibility modules (the thin modules at 0.3's import paths).

Every compatibility module's docstring starts with "Compatibility module" and the full list is in
docs/migrating-from-agent-lightning.md. A compatibility module re-exports agl's implementation of each
0.3 name, resolves names that now live in a plugin through the plugin registry on first access, and
answers names agl dropped with a `NotProvidedError` that names the replacement.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

__all__ = [
    "NotProvidedError",
    "PluginName",
    "cli_main",
    "import_required",
    "module_getattr",
    "not_provided",
    "plugin_module",
    "store_client_options",
]

MIGRATION_GUIDE = "docs/migrating-from-agent-lightning.md"
"""Where each difference from Agent Lightning 0.3 is explained."""


class NotProvidedError(ImportError):
    """A 0.3 name agl does not provide here: its plugin is not installed, or agl replaced it.

    An ImportError, so ``from agl_core.x import Name`` fails with this message.
    """


class PluginName:
    """A 0.3 name now in a plugin: ``kind``/``name`` in the plugin registry, from ``distribution``.

    With ``attribute``, the name is that attribute of the module the registered component is defined in
    (a helper 0.3 kept next to the component, e.g. APO's prompt files next to ``APO``).
    """

    def __init__(self, kind: str, name: str, distribution: str, attribute: str | None = None) -> None:
        self.kind, self.name, self.distribution, self.attribute = kind, name, distribution, attribute

    def load(self, public_name: str) -> Any:
        """The plugin's object; `NotProvidedError` with the ``pip install`` hint when missing."""
        from agl_core.errors import UnknownComponentError
        from agl_core.plugins import get_registry

        try:
            component = get_registry(self.kind).resolve(self.name)
        except UnknownComponentError as exc:
            raise NotProvidedError(
                f"{public_name} is provided by the {self.distribution} plugin: "
                f"pip install {self.distribution} ({exc})"
            ) from exc
        if self.attribute is None:
            return component
        module = importlib.import_module(component.__module__)
        try:
            return getattr(module, self.attribute)
        except AttributeError:
            raise NotProvidedError(
                f"{public_name} needs a newer {self.distribution}: pip install --upgrade {self.distribution} "
                f"({module.__name__} has no {self.attribute})"
            ) from None


def not_provided(public_name: str, replacement: str) -> NotProvidedError:
    """The error for a 0.3 name agl dropped; ``replacement`` says what to use instead."""
    return NotProvidedError(
        f"{public_name} (Agent Lightning 0.3) is not provided by agl: {replacement} (see {MIGRATION_GUIDE})."
    )


def import_required(module: str, public_name: str, install: str) -> ModuleType:
    """Import ``module`` for ``public_name``; if missing, `NotProvidedError`: ``pip install <install>``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise NotProvidedError(f"{public_name} needs {module}: pip install {install} ({exc})") from exc


def plugin_module(module: str, source: str, distribution: str = "agl-legacy") -> Callable[[str], Any]:
    """A ``__getattr__`` for ``module`` serving every public name of ``source``, a module of ``distribution``.

    The shim at a 0.3 path whose machinery lives in a plugin: ``__getattr__ = plugin_module(__name__, ...)``.
    Without the plugin, reading a public name raises `NotProvidedError` with the ``pip install`` line.
    """

    def __getattr__(name: str) -> Any:
        if name.startswith("_") and name != "__all__":
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        try:
            provider = importlib.import_module(source)
        except ModuleNotFoundError as exc:
            if exc.name is None or exc.name.partition(".")[0] != source.partition(".")[0]:
                raise
            raise NotProvidedError(
                f"{module}.{name} (Agent Lightning 0.3) is provided by the {distribution} plugin: "
                f"pip install {distribution}"
            ) from exc
        try:
            return getattr(provider, name)
        except AttributeError:
            raise AttributeError(f"module {module!r} has no attribute {name!r}") from None

    return __getattr__


def cli_main(subcommand: str) -> Callable[[Sequence[str] | None], int]:
    """0.3's ``main(argv)`` of a CLI module: runs ``agl SUBCOMMAND ARGV...`` and returns the exit status."""

    def main(argv: Sequence[str] | None = None) -> int:
        import sys

        from agl_core.cli import build_cli

        args = list(argv) if argv is not None else sys.argv[1:]
        try:
            build_cli().main(args=[subcommand, *args], prog_name="agl", standalone_mode=False)
        except SystemExit as exc:
            return int(exc.code or 0) if not isinstance(exc.code, str) else 1
        return 0

    main.__doc__ = (
        f"Run ``agl {subcommand} ARGV...`` (0.3's entry point of this subcommand); returns the exit status."
    )
    return main


Target = str | PluginName | Callable[[], Any]
"""How a compatibility module finds a name: ``"module:attr"``, a plugin name, or a factory."""


def module_getattr(module: str, names: dict[str, Target], dropped: dict[str, str] | None = None) -> Any:
    """A module ``__getattr__``: resolves ``names`` lazily, raises for ``dropped`` (name -> replacement)."""
    dropped = dropped or {}

    def __getattr__(name: str) -> Any:
        target = names.get(name)
        if target is None:
            if name in dropped:
                raise not_provided(f"{module}.{name}", dropped[name])
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        if isinstance(target, PluginName):
            return target.load(f"{module}.{name}")
        if isinstance(target, str):
            source, _, attr = target.partition(":")
            return getattr(importlib.import_module(source), attr or name)
        return target()

    return __getattr__


def store_client_options(
    url: str | None,
    server_address: str | None,
    retry_delays: Sequence[float] | None,
    request_timeout: float | None,
) -> tuple[str, dict[str, Any]]:
    """``LightningStoreClient``'s URL and the settings Agent Lightning 0.3's arguments ask for.

    ``server_address`` is 0.3's name of ``url``; ``retry_delays`` (one delay per retry) becomes
    ``retries=len(retry_delays)`` and ``backoff=(first, largest)``; ``request_timeout`` becomes ``timeout``.
    """
    if (url is None) == (server_address is None):
        raise TypeError(
            "LightningStoreClient needs the store URL once: url=... (or 0.3's server_address=...)."
        )
    options: dict[str, Any] = {}
    if retry_delays is not None:
        delays = [float(delay) for delay in retry_delays]
        if any(delay < 0 for delay in delays):
            raise ValueError(f"LightningStoreClient retry_delays must be >= 0, got {list(retry_delays)}.")
        options["retries"] = len(delays)
        if delays:
            options["backoff"] = (delays[0], max(delays))
    if request_timeout is not None:
        options["timeout"] = request_timeout
    return str(url if url is not None else server_address), options
