"""agentlightning-agl: the ``agentlightning`` import name on top of agl (0.3 code runs unchanged).

A **replacement** for the ``agentlightning`` distribution, never a companion: both install a package named
``agentlightning``, so install one or the other. ``agentlightning.X`` is the module ``agl_core.X`` itself
(the same object, so patching one patches the other), and ``agentlightning.Name`` is ``agl_core.Name``,
except 0.3's ``LightningStore``: under this name it is agl-legacy's ``LightningStore03``, so 0.3 stores
that override public methods are built as in 0.3, and every agl store is an instance of it (the two
modules that define it, ``agentlightning.store`` and ``.store.base``, pass writes on to agl's). Handlers
on ``agentlightning.*`` loggers receive agl's records (agl_core's log bridge). 0.3's machinery that agl
does not use needs agl-legacy, installed with this distribution.
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
_STORE_03_MODULES = frozenset({"agentlightning.store", "agentlightning.store.base"})
"""The modules that define 0.3's ``LightningStore`` (the top level's is `__getattr__`'s)."""


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


def _store_03() -> type:
    from agl_legacy.store import LightningStore03

    return LightningStore03


class _Store03Module(ModuleType):
    """``agl_core.store`` (or ``.base``) under its 0.3 name, whose ``LightningStore`` is 0.3's.

    Reads fall through to the agl module and writes (a test's monkeypatch) go to it, so patching one still
    patches the other; only ``LightningStore``, the import system's dunders and submodules are its own.
    """

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_agl_module"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("__") or name == "LightningStore" or isinstance(value, ModuleType):
            super().__setattr__(name, value)
        else:
            setattr(self.__dict__["_agl_module"], name, value)

    def __delattr__(self, name: str) -> None:
        if name in self.__dict__:
            super().__delattr__(name)
        else:
            delattr(self.__dict__["_agl_module"], name)

    def __dir__(self) -> list[str]:
        return dir(self.__dict__["_agl_module"])


def _with_store_03(name: str, module: ModuleType) -> ModuleType:
    own = _Store03Module(name, module.__doc__)
    own.__dict__.update(_agl_module=module, LightningStore=_store_03())
    for attr in ("__all__", "__path__", "__file__"):
        if hasattr(module, attr):
            own.__dict__[attr] = getattr(module, attr)
    return own


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
        """The ``agl_core`` module itself, imported now (0.3's ``LightningStore`` where it is defined)."""
        module = importlib.import_module("agl_core." + spec.name[len(_PREFIX) :])
        return _with_store_03(spec.name, module) if spec.name in _STORE_03_MODULES else module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing: the ``agl_core`` module ran when it was imported."""


_refuse_the_real_package()
if not any(isinstance(finder, _AglModules) for finder in sys.meta_path):
    sys.meta_path.insert(0, _AglModules())

__version__ = agl_core.__version__
__all__ = list(agl_core.__all__)


def __getattr__(name: str) -> Any:
    return _store_03() if name == "LightningStore" else getattr(agl_core, name)


def __dir__() -> list[str]:
    return dir(agl_core)
