"""Errors raised by the plugin system and component resolution."""

from __future__ import annotations

from typing import Any


class AglError(Exception):
    """Base class of agl's own errors."""


class PluginError(AglError):
    """A plugin could not be loaded or registered."""


class PluginLoadError(PluginError):
    """A plugin failed at one stage (raised only with ``AGL_PLUGINS_STRICT=1``)."""

    def __init__(self, name: str, distribution: str | None, stage: str, cause: BaseException) -> None:
        self.name = name
        self.distribution = distribution
        self.stage = stage
        self.cause = cause
        super().__init__(
            f"agl plugin {name!r} ({distribution or 'unknown distribution'}) failed at stage "
            f"{stage!r}: {type(cause).__name__}: {cause}"
        )


class PluginConflictError(PluginError):
    """Two plugins claim the same component name."""

    def __init__(self, kind: str, name: str, existing: Any, incoming: tuple[str, str | None]) -> None:
        self.kind = kind
        self.name = name
        first = f"{existing.plugin!r} from {existing.distribution or 'an unknown distribution'}"
        second = f"{incoming[0]!r} from {incoming[1] or 'an unknown distribution'}"
        self.distributions = (existing.distribution, incoming[1])
        super().__init__(
            f"Conflicting plugins for {kind} {name!r}: provided by plugin {first} and by plugin "
            f"{second}. Uninstall one of them, or disable one with AGL_DISABLE_PLUGINS=<name>."
        )


class UnknownComponentError(AglError, KeyError, ValueError):
    """No component is registered under the requested name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ComponentSpecError(AglError, TypeError, ValueError):
    """A component spec (instance, name, dict, class or factory) cannot be used."""


class MissingRequirementError(AglError, ImportError):
    """A registered component needs a package that is not installed."""
