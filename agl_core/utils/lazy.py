"""Public names of a package imported on first use (PEP 562 module ``__getattr__``).

A package whose ``__init__`` imports every submodule makes ``import package`` pay for all of them, and a
plugin's submodules may pull in torch or a vendor SDK. With `lazy_exports` the ``__init__`` says where
each public name lives; the module is imported when the name is first read, and the value is then kept in
the package's namespace, so later reads are plain attribute lookups. Keep an ``if TYPE_CHECKING:`` block
importing the same names for type checkers and IDEs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for `package` that import each name of `exports` on first access.

    Args:
        package: The package's ``__name__``.
        exports: Public name -> the module defining it (``"pkg.module"``), or ``"pkg.module:attribute"``
            when it has another name there.

    Example, a plugin's ``__init__.py``::

        __getattr__, __dir__ = lazy_exports(__name__, {"Tinker": "agl_tinker.algorithm"})

    Reading a name that is not in `exports` raises `AttributeError`, as for any module; an import error
    of the defining module propagates unchanged.
    """
    table = dict(exports)

    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, _, attribute = target.partition(":")
        value = getattr(importlib.import_module(module_name), attribute or name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__
