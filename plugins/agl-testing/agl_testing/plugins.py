"""Helpers for testing agl plugins: throwaway managers, fake entry points and a CLI runner."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from agl_core.plugins import PluginManager, PluginRecord, set_plugin_manager


@dataclass
class FakeDistribution:
    """The two fields of ``importlib.metadata.Distribution`` the loader reads."""

    name: str
    version: str


@dataclass
class FakeEntryPoint:
    """An entry point of group ``agl`` that loads ``value`` (a ``module`` path or an object)."""

    name: str
    value: Any
    dist: FakeDistribution | None = None
    group: str = "agl"

    def load(self) -> Any:
        """Import the module (or call the callable) this entry point names."""
        if isinstance(self.value, str):
            return importlib.import_module(self.value)
        if isinstance(self.value, ModuleType) or not callable(self.value):
            return self.value
        return self.value()


def fake_entry_point(
    name: str, value: Any, *, distribution: str | None = None, version: str = "1.0.0"
) -> FakeEntryPoint:
    """Make an entry point for :meth:`PluginManager.load_entrypoints` without installing anything.

    ``value`` is a module path, a module/object, or a zero-argument callable that is called on
    load (so it can raise, like a plugin whose import fails).
    """
    dist = FakeDistribution(distribution or f"agl-{name}", version)
    return FakeEntryPoint(name=name, value=value, dist=dist)


@contextmanager
def register_plugin(
    manager: PluginManager, plugin: Any, name: str, *, distribution: str | None = None
) -> Iterator[PluginRecord]:
    """Register ``plugin`` for the duration of the block, then remove it and all it added."""
    record = manager.register(plugin, name=name, distribution=distribution)
    try:
        yield record
    finally:
        manager.unregister(name)


@contextmanager
def use_plugin_manager(manager: PluginManager) -> Iterator[PluginManager]:
    """Make ``manager`` the process-wide one inside the block (so ``Trainer`` etc. see it)."""
    previous = set_plugin_manager(manager)
    try:
        yield manager
    finally:
        set_plugin_manager(previous)


@dataclass
class CliResult:
    """Outcome of :func:`run_cli`."""

    exit_code: int
    output: str
    stderr: str

    def json(self) -> Any:
        """Parse the standard output as JSON."""
        import json

        return json.loads(self.output)


def run_cli(
    *args: str, manager: PluginManager | None = None, env: Mapping[str, str] | None = None
) -> CliResult:
    """Run ``agl ARGS...`` in-process with ``manager`` (default: a fresh one with built-ins)."""
    from click.testing import CliRunner

    from agl_core.cli import build_cli

    cli = build_cli(manager if manager is not None else PluginManager(strict=False))
    runner = CliRunner()
    result = runner.invoke(cli, list(args), env=dict(env or {}), catch_exceptions=False)
    return CliResult(result.exit_code, result.stdout, result.stderr)


def records_by_name(records: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Index ``agl plugins list --json`` records by plugin name."""
    return {r["name"]: r for r in records}


def plugin_module(name: str, **hooks: Any) -> ModuleType:
    """A throwaway plugin module made of hook functions: ``plugin_module("p", agl_register_stores=fn)``."""
    module = ModuleType(name)
    for hook_name, fn in hooks.items():
        setattr(module, hook_name, fn)
    return module
