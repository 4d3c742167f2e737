"""`agl_core.utils.lazy.lazy_exports`: names imported on first read, kept, and unknown names refused."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A throwaway package ``lazypkg`` whose ``heavy`` submodule records that it was imported."""
    root = tmp_path / "lazypkg"
    root.mkdir()
    (root / "__init__.py").write_text(
        "from agl_core.utils.lazy import lazy_exports\n"
        "__getattr__, __dir__ = lazy_exports(\n"
        "    __name__,\n"
        "    {'Heavy': 'lazypkg.heavy', 'Renamed': 'lazypkg.heavy:Original', 'Broken': 'lazypkg.missing'},\n"
        ")\n",
        encoding="utf-8",
    )
    (root / "heavy.py").write_text(
        "IMPORTS = []\nIMPORTS.append(1)\nclass Heavy: ...\nclass Original: ...\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "lazypkg"
    for name in [n for n in sys.modules if n == "lazypkg" or n.startswith("lazypkg.")]:
        del sys.modules[name]


def test_a_name_is_imported_on_first_read_and_then_kept(package: str) -> None:
    module = importlib.import_module(package)
    assert "lazypkg.heavy" not in sys.modules
    first = module.Heavy
    assert "lazypkg.heavy" in sys.modules
    assert "Heavy" in vars(module)  # later reads are plain attribute lookups
    assert module.Heavy is first is sys.modules["lazypkg.heavy"].Heavy
    assert sys.modules["lazypkg.heavy"].IMPORTS == [1]


def test_module_colon_attribute_names_another_attribute(package: str) -> None:
    module = importlib.import_module(package)
    assert module.Renamed is sys.modules["lazypkg.heavy"].Original
    from lazypkg import Heavy  # type: ignore[import-not-found]  # ``from ... import`` goes through it too

    assert Heavy.__name__ == "Heavy"


def test_unknown_names_raise_attribute_error_and_import_errors_propagate(package: str) -> None:
    module = importlib.import_module(package)
    with pytest.raises(AttributeError, match="module 'lazypkg' has no attribute 'Nope'"):
        _ = module.Nope
    assert not hasattr(module, "Nope")
    with pytest.raises(ModuleNotFoundError, match=r"lazypkg\.missing"):
        _ = module.Broken


def test_dir_lists_lazy_names_before_they_are_imported(package: str) -> None:
    module = importlib.import_module(package)
    assert {"Heavy", "Renamed", "Broken", "__getattr__"} <= set(dir(module))
    assert "lazypkg.heavy" not in sys.modules
