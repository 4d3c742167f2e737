"""agentlightning-agl: the ``agentlightning`` import name on top of agl (0.3 code runs unchanged).

A **replacement** for the ``agentlightning`` distribution, never a companion: both install a package named
``agentlightning``, so install one or the other. ``agentlightning.X`` is the module ``agl_core.X`` itself
(the same object, so patching one patches the other), and ``agentlightning.Name`` is ``agl_core.Name``.
Handlers on ``agentlightning.*`` loggers receive agl's records (agl_core's log bridge). 0.3's machinery
that agl does not use needs agl-legacy, installed with this distribution.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType
from typing import Any

import agl_core

_PREFIX = "agentlightning."


def _refuse_the_real_package() -> None:
    try:
        real = version("agentlightning")
    except PackageNotFoundError:
        return
    raise ImportError(
        f"Both agentlightning {real} (Microsoft's package) and agentlightning-agl are installed; they "
        "provide the same import name. Keep one: pip uninstall agentlightning (to run on agl) or "
        "pip uninstall agentlightning-agl (to run on Agent Lightning)."
    )


class _AglModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``agentlightning.x.y`` as the module ``agl_core.x.y`` (one module object, two names)."""

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        """A spec for ``agentlightning.*`` names whose ``agl_core`` module exists; None for others."""
        if not fullname.startswith(_PREFIX):
            return None
        if importlib.util.find_spec("agl_core." + fullname[len(_PREFIX) :]) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        """The ``agl_core`` module itself, imported now."""
        return importlib.import_module("agl_core." + spec.name[len(_PREFIX) :])

    def exec_module(self, module: ModuleType) -> None:
        """Nothing: the ``agl_core`` module ran when it was imported."""


_refuse_the_real_package()
if not any(isinstance(finder, _AglModules) for finder in sys.meta_path):
    sys.meta_path.insert(0, _AglModules())

__version__ = agl_core.__version__
__all__ = list(agl_core.__all__)


def __getattr__(name: str) -> Any:
    return getattr(agl_core, name)


def __dir__() -> list[str]:
    return dir(agl_core)
